// Writes the seed corpus of every harness in tests/fuzz (tests/fuzz/corpus/<harness>/<seed>) from
// ringd's own encoders, so the fuzzers start from well-formed messages and files and mutate from
// there. Run by scripts/fuzz.sh --seeds after a format changes; the output is committed.
//
//   make_seeds DIRECTORY
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/sha256.h"
#include "fusion/negotiation_codec.h"
#include "launcher/exec_protocol.h"
#include "launcher/launch_plan.h"
#include "model/checkpoint.h"
#include "model/gradient_profile.h"
#include "model/idx.h"
#include "net/handshake.h"
#include "net/handshake_codec.h"
#include "proto/ps.pb.h"
#include "ps/frame.h"
#include "rendezvous/tcp_store_protocol.h"

using namespace ringd;

namespace {

std::string root;

void write_seed(const std::string& harness, const std::string& name, const std::string& bytes) {
  const std::string dir = root + "/" + harness;
  ::mkdir(root.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::cerr << "make_seeds: cannot write " << dir << "/" << name << "\n";
    std::exit(1);
  }
}

std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::string selector(int value) { return std::string(1, static_cast<char>(value)); }
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}
template <typename T>
std::string raw(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(value));
}

void negotiation() {
  fusion::Request request;
  request.name = "fc1/weight";
  request.params.shape = {256, 784};
  request.waited_us = 1200;
  fusion::Request grouped = request;
  grouped.name = "2.bias";
  grouped.params.shape = {10};
  grouped.params.group = "step";
  grouped.params.group_size = 2;
  grouped.params.op = ReduceOp::kMax;
  fusion::RankState state;
  state.blocked = true;
  state.awaited = {"fc1/weight"};
  state.pending = {{"fc1/weight", 3}};
  state.done = 9;
  write_seed("negotiation", "requests", selector(0) + fusion::encode_requests(0, {request}));
  write_seed("negotiation", "requests_state_rank3",
             selector(3 << 1) + fusion::encode_requests(3, {request, grouped}, &state));
  fusion::RankState stopping;
  stopping.shutting_down = true;
  stopping.failed = true;
  stopping.reason = "on an uncaught ValueError: bad batch";
  stopping.done_by_name = {{"fc1/weight", 9}};
  write_seed("negotiation", "requests_shutdown_rank1",
             selector(1 << 1) + fusion::encode_requests(1, {}, &stopping));

  fusion::ResponseList list;
  fusion::Response response;
  response.name = "fc1/weight";
  response.params = request.params;
  fusion::Response gathered;
  gathered.name = "labels";
  gathered.params.kind = CollectiveKind::kAllgather;
  gathered.params.shape = {32};
  gathered.first_dims = {32, 32, 30, 32};
  fusion::Response failed;
  failed.name = "2.bias";
  failed.error = "rank 1 has shape [12], rank 0 [10]";
  list.responses = {response, gathered, failed};
  write_seed("negotiation", "responses_world4",
             selector(1 | (3 << 1)) + fusion::encode_responses(list));
  fusion::ResponseList stopped;
  stopped.stopped = {{1, stopping}};
  stopped.deadlock = "rank 0 waits for 'a', rank 1 for 'b'";
  stopped.shutdown = true;
  stopped.shutdown_reason = "every rank shut down";
  write_seed("negotiation", "responses_stopped_world2",
             selector(1 | (1 << 1)) + fusion::encode_responses(stopped));
}

void handshake() {
  net::HelloInfo hello;
  hello.rank = 1;
  hello.target_rank = 0;
  hello.world_size = 4;
  hello.job_id = "0123456789abcdef0123456789abcdef";
  hello.address = "10.0.0.7:4711";
  uint8_t nonce[net::kNonceBytes] = {7};
  const std::vector<uint8_t> hello_message = net::codec::encode_message(
      net::HandshakeType::kHello, net::codec::encode_hello(hello, nonce));
  const std::vector<uint8_t> proof_message =
      net::codec::encode_message(net::HandshakeType::kProof, std::vector<uint8_t>(32, 0));
  write_seed("handshake", "accept_hello_proof",
             selector(0) + text(hello_message) + text(proof_message));
  write_seed("handshake", "accept_hello_secret", selector(0x81) + text(hello_message));
  net::HelloInfo store_client;
  store_client.kind = net::PeerKind::kStoreClient;
  write_seed("handshake", "accept_store_client",
             selector(0) +
                 text(net::codec::encode_message(net::HandshakeType::kHello,
                                                 net::codec::encode_hello(store_client, nonce))));
  write_seed("handshake", "accept_foreign_version",
             selector(0) + text(net::encode_handshake_header(net::HandshakeType::kHello, 0, 9)));

  net::codec::Writer challenge;
  challenge.i32(0);
  challenge.raw(nonce, sizeof(nonce));
  challenge.raw(std::vector<uint8_t>(32, 3).data(), 32);
  const std::vector<uint8_t> accepted = net::codec::encode_message(
      net::HandshakeType::kResult, net::codec::encode_result(net::HandshakeStatus::kAccepted, ""));
  write_seed(
      "handshake", "dial_challenge_result",
      selector(1) +
          text(net::codec::encode_message(net::HandshakeType::kChallenge, challenge.bytes())) +
          text(accepted));
  write_seed("handshake", "dial_refused",
             selector(1) + text(net::codec::encode_message(
                               net::HandshakeType::kResult,
                               net::codec::encode_result(net::HandshakeStatus::kRefused,
                                                         "rank 1 is already claimed"))));
  write_seed("handshake", "decode_hello", selector(2) + text(hello_message));
}

std::string store_request(store_protocol::Op op, const std::string& key, const std::string& value,
                          uint32_t timeout_ms = 0) {
  const store_protocol::RequestHeader header{store_protocol::kMagic, static_cast<uint32_t>(op),
                                             static_cast<uint32_t>(key.size()), timeout_ms,
                                             value.size()};
  return raw(header) + key + value;
}

std::string store_response(store_protocol::Status status, const std::string& value) {
  const store_protocol::ResponseHeader header{store_protocol::kMagic, static_cast<uint32_t>(status),
                                              value.size()};
  return raw(header) + value;
}

void store() {
  using store_protocol::Op;
  using store_protocol::Status;
  write_seed("store", "server_set_get_add",
             selector(0) + store_request(Op::kSet, "rank/1/address", "10.0.0.7:4711") +
                 store_request(Op::kGet, "rank/1/address", "") +
                 store_request(Op::kAdd, "ringd/job", "0123456789abcdef0123456789abcdef 4") +
                 store_request(Op::kAdd, "ringd/job", "fedcba 4"));
  write_seed("store", "server_get_waits", selector(0) + store_request(Op::kGet, "missing", "", 50));
  write_seed("store", "server_replace_reserved",
             selector(0) + store_request(Op::kAdd, "ringd/rank/1", "pid 1") +
                 store_request(Op::kSet, "ringd/rank/1", "pid 2"));
  write_seed("store", "client_get_ok",
             selector(1 | (0 << 1)) + store_response(Status::kOk, "10.0.0.7:4711"));
  write_seed("store", "client_add_exists",
             selector(1 | (1 << 1)) + store_response(Status::kExists, "0123 4"));
  write_seed("store", "client_set_error",
             selector(1 | (2 << 1)) + store_response(Status::kError, "reserved key"));
}

void exec() {
  using launcher::exec::MessageType;
  std::string hello = "RGX1";
  hello += raw(launcher::exec::kProtocolVersion);
  hello += std::string(launcher::exec::kNonceBytes, '\x05');
  write_seed("exec", "agent_handshake", selector(0) + hello + std::string(32, '\x09'));
  write_seed("exec", "client_handshake",
             selector(3) + hello + std::string(32, '\x09') + std::string(1, '\0'));
  launcher::exec::SessionKeys keys;  // the harness's fixed keys, seen from the sender
  keys.send.fill(2);
  keys.receive.fill(1);
  launcher::exec::Channel sender(-1, keys, "seed");
  write_seed(
      "exec", "frames_signed",
      selector(1) + sender.encode(MessageType::kRun, "orted --hnp-uri 1.0;tcp://10.0.0.1:1") +
          sender.encode(MessageType::kStdin, "abc") + sender.encode(MessageType::kStdinEof, ""));
  std::string frames;
  for (const auto& [type, payload] :
       std::vector<std::pair<MessageType, std::string>>{{MessageType::kPing, ""},
                                                        {MessageType::kStdout, "hello\n"},
                                                        {MessageType::kExit, "exit 0"}}) {
    frames += static_cast<char>(type);
    frames += static_cast<char>(payload.size() & 0xff);
    frames += static_cast<char>(payload.size() >> 8);
    frames += payload;
  }
  write_seed("exec", "frames_to_sign", selector(2) + frames);
  write_seed("exec", "command_line_openmpi",
             selector(4) +
                 "PATH=/opt/ompi/bin:$PATH ; export PATH ; LD_LIBRARY_PATH=/opt/ompi/lib:"
                 "${LD_LIBRARY_PATH:-} ; export LD_LIBRARY_PATH ; /opt/ompi/bin/orted "
                 "-mca ess \"env\" -mca ess_base_jobid \"2130706432\" --tree-spawn");
  write_seed("exec", "command_line_profile",
             selector(4) + "( test ! -r ./.profile || . ./.profile; ringd status 'a b' \\$x )");
}

std::string ps_frame(const ps::Header& header, const std::string& payload) {
  const std::string encoded = header.SerializeAsString();
  std::string frame(ps::kFrameMagic, 4);
  frame += raw(ps::kFrameVersion);
  frame += raw(static_cast<uint32_t>(encoded.size()));
  frame += raw(uint32_t{0});
  return frame + encoded + payload;
}

void ps_frames() {
  ps::Header push;
  push.set_type(ps::PUSH);
  push.set_step(3);
  push.set_learning_rate(0.1);
  push.add_tensors(0);
  push.set_payload_bytes(8);
  ps::Header values;
  values.set_type(ps::VALUES);
  values.set_step(3);
  values.add_tensors(0);
  values.add_tensors(2);
  values.set_payload_bytes(16);
  write_seed("ps_frame", "push_values",
             ps_frame(push, std::string(8, '\x01')) + ps_frame(values, std::string(16, '\x02')));
  ps::Header registration;
  registration.set_type(ps::REGISTER);
  registration.mutable_job()->set_server_index(1);
  write_seed("ps_frame", "register", ps_frame(registration, ""));
  write_seed("ps_frame", "error", ps_frame(ps::error_header(7, "worker 2 was lost"), ""));
}

void checkpoint() {
  const std::string dir = root + "/.checkpoint-seed";
  std::vector<float> weight(6, 0.5f), bias(3, -1.0f), momentum_weight(6, 0.25f), momentum_bias(3);
  std::vector<model::ParameterView> params(2);
  params[0] = {"fc1/weight", {3, 2}, weight.data(), nullptr, weight.size()};
  params[1] = {"fc1/bias", {3}, bias.data(), nullptr, bias.size()};
  model::CheckpointMeta meta;
  meta.model = "mlp 2-3";
  meta.step = 100;
  meta.world_size = 2;
  meta.run_id = "0123456789abcdef0123456789abcdef";
  const std::string with_momentum =
      model::write_checkpoint(dir, meta, params, {momentum_weight.data(), momentum_bias.data()});
  write_seed("checkpoint", "with_momentum", read_file(with_momentum));
  meta.step = 200;
  const std::string without = model::write_checkpoint(dir, meta, params, {});
  write_seed("checkpoint", "without_momentum", read_file(without));
  std::remove(with_momentum.c_str());
  std::remove(without.c_str());
  ::rmdir(dir.c_str());
}

void idx() {
  const std::string path = root + "/.idx-seed";
  model::write_idx(path, {4}, {1, 2, 3, 9});
  write_seed("idx", "labels", selector(0) + read_file(path));
  model::write_idx(path, {2, 3, 3}, std::vector<uint8_t>(18, 200));
  const std::string images = read_file(path);
  write_seed("idx", "images", selector(1) + images);
  write_seed("idx", "images_first_item", selector(1 | (1 << 1)) + images);
  // gzip, as the data sets are distributed
  std::string compressed(compressBound(images.size()) + 32, '\0');
  z_stream stream{};
  deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(images.data()));
  stream.avail_in = static_cast<uInt>(images.size());
  stream.next_out = reinterpret_cast<Bytef*>(compressed.data());
  stream.avail_out = static_cast<uInt>(compressed.size());
  deflate(&stream, Z_FINISH);
  compressed.resize(stream.total_out);
  deflateEnd(&stream);
  write_seed("idx", "images_gzip", selector(1) + compressed);
  std::remove(path.c_str());
}

void http() {
  write_seed("http", "get_healthz", selector(1) + "GET /healthz HTTP/1.1\r\nHost: ringd-0\r\n\r\n");
  write_seed("http", "get_metrics_query",
             selector(1) + "GET /metrics?name=x HTTP/1.0\r\nAccept: text/plain\r\n\r\n");
  write_seed("http", "post",
             selector(1) + "POST /healthz HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  write_seed("http", "parse_only", selector(0) + "GET /readyz HTTP/1.1\r\n\r\n");
}

void gradient_profiles() {
  write_seed("gradient_profile", "small",
             "# name<TAB>elements\nconv1.weight\t9408\nbn1.weight\t64\r\n\nfc.bias\t1000\n");
  std::string resnet;
  for (const model::GradientTensor& tensor : model::load_gradient_profile("resnet50").tensors) {
    resnet += tensor.name + "\t" + std::to_string(tensor.elements) + "\n";
  }
  write_seed("gradient_profile", "resnet50", resnet);
}

void state_files() {
  const std::string marker = launcher::marker_record({"ringd", "train", "--epochs", "2"}, 4, 1);
  write_seed("state_file", "marker", selector(12) + marker);
  write_seed("state_file", "failure",
             selector(12) + launcher::failure_record(3, {"ringd", "train"}, 4, 1));
  write_seed("state_file", "attempts", selector(4) + "3\n");
  write_seed("state_file", "too_big", selector(2) + "12345678");
}

void configs() {
  write_seed("config", "env_mpirun",
             selector(0) +
                 "OMPI_COMM_WORLD_RANK=1\nOMPI_COMM_WORLD_SIZE=4\n"
                 "OMPI_COMM_WORLD_LOCAL_RANK=1\nOMPI_COMM_WORLD_LOCAL_SIZE=2\n");
  write_seed("config", "env_torchrun",
             selector(0) +
                 "RANK=1\nWORLD_SIZE=2\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\n"
                 "MASTER_ADDR=127.0.0.1\nMASTER_PORT=29500\nTORCHELASTIC_RUN_ID=abc\n");
  write_seed("config", "env_statefulset",
             selector(0) +
                 "POD_NAME=ringd-2\nRINGD_REPLICAS=4\nPOD_NAMESPACE=ml\n"
                 "RINGD_SERVICE=ringd\nRINGD_TRANSPORT=tcp\n");
  write_seed("config", "bytes", selector(1) + "64M");
  write_seed("config", "seconds", selector(2) + "1.5");
  write_seed("config", "log_level", selector(3) + "warning");
  write_seed("config", "host_port", selector(4) + "[::1]:29400");
  write_seed("config", "endpoint", selector(5) + "10.0.0.7:4711");
  write_seed("config", "shard_policy", selector(6) + "greedy-by-size");
  write_seed("config", "layers", selector(7) + "784,256,128,10");
  write_seed("config", "spread", selector(8) + "size");
  write_seed("config", "servers", selector(9) + "ps-0.ps:7000,ps-1.ps:7000");
  write_seed("config", "collective", selector(10) + "reducescatter");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds DIRECTORY\n";
    return 2;
  }
  root = argv[1];
  negotiation();
  handshake();
  store();
  exec();
  ps_frames();
  checkpoint();
  idx();
  http();
  gradient_profiles();
  state_files();
  configs();
  return 0;
}
