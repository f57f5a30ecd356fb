"""One process of an elastic ringd.torch job (tests/python/test_torch_elastic.py): Horovod's
elastic pattern (hvd.elastic.run, TorchState with an ElasticSampler, commit() after every batch)
on a linear model. argv: out_dir name [die_at_batch]. Appends one line per committed batch to
<out_dir>/<name>.jsonl (the epoch, the dataset indices it trained on, the world size) and writes
<out_dir>/<name>.json at the end (the final parameters, rank, size, resets); with die_at_batch it
SIGKILLs itself after that batch's update, before its commit (a lost process).
"""
import json
import os
import pathlib
import signal
import sys
import time

import torch

import ringd.torch as hvd

out_dir, name = pathlib.Path(sys.argv[1]), sys.argv[2]
die_at = int(sys.argv[3]) if len(sys.argv) > 3 else -1
torch.manual_seed(0)
torch.set_num_threads(1)
EPOCHS, BATCH = 6, 4

generator = torch.Generator().manual_seed(1)
features = torch.randn(240, 8, generator=generator)
targets = features @ torch.randn(8, 1, generator=generator)
dataset = torch.utils.data.TensorDataset(features, targets)

hvd.init()
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=5)
state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)
resets = [0]
state.register_reset_callbacks([lambda: resets.__setitem__(0, resets[0] + 1)])
log = open(out_dir / f"{name}.jsonl", "a")
batches = [0]


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, EPOCHS):
        state.sampler.set_epoch(state.epoch)
        loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=state.sampler)
        indices = list(state.sampler)
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            for p in model.parameters():
                hvd.allreduce_(p.grad, op=hvd.Average, name=f"grad.{tuple(p.shape)}")
            optimizer.step()
            batches[0] += 1
            record = json.dumps({"epoch": state.epoch, "size": hvd.size(),
                                 "indices": indices[i * BATCH:(i + 1) * BATCH]})
            if batches[0] == die_at:
                # This batch's update (with this share) is the survivors' next commit.
                log.write(record + "\n")
                log.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.03)  # a run long enough to lose a process and take one in
            state.sampler.record_batch(i, BATCH)
            state.batch = i + 1
            try:
                state.commit()
            finally:
                # Committed either way: commit() saves before it asks the others (a lost rank or
                # a newcomer found there raises after the save).
                log.write(record + "\n")
                log.flush()
        state.batch = 0


train(state)
(out_dir / f"{name}.json").write_text(json.dumps({
    "params": [p.detach().flatten().tolist() for p in model.parameters()],
    "rank": hvd.rank(), "size": hvd.size(), "resets": resets[0], "commits": state._commits}))
hvd.shutdown()
