#include "launcher/exec_command_line.h"

#include <cctype>
#include <map>

#include "ringd/error.h"

namespace ringd::launcher {
namespace {

struct Token {
  std::string text;
  bool separator = false;  // an unquoted ';'
  bool quoted = false;     // some part was quoted (so "a=b" in quotes is not an assignment)
};

bool is_name(const std::string& text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  for (char c : text) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

class Tokenizer {
 public:
  Tokenizer(const std::string& line, const job::EnvLookup& env,
            const std::map<std::string, std::string>* assigned)
      : line_(line), env_(env), assigned_(assigned) {}

  // Tokens are produced one statement at a time so expansions see earlier assignments.
  bool next(Token* out) {
    skip_blanks();
    if (at_ >= line_.size()) return false;
    *out = Token();
    if (line_[at_] == ';') {
      ++at_;
      out->separator = true;
      return true;
    }
    bool any = false;
    while (at_ < line_.size()) {
      const char c = line_[at_];
      if (c == ' ' || c == '\t' || c == '\n' || c == ';') break;
      any = true;
      if (c == '\'') {
        const size_t close = line_.find('\'', at_ + 1);
        if (close == std::string::npos) fail("an unterminated '");
        out->text += line_.substr(at_ + 1, close - at_ - 1);
        out->quoted = true;
        at_ = close + 1;
      } else if (c == '"') {
        out->quoted = true;
        double_quoted(&out->text);
      } else if (c == '\\') {
        if (at_ + 1 >= line_.size()) fail("a trailing backslash");
        out->text += line_[at_ + 1];
        at_ += 2;
      } else if (c == '$') {
        expand(&out->text);
      } else if (c == '|' || c == '&' || c == '<' || c == '>' || c == '(' || c == ')' || c == '`') {
        fail(std::string("'") + c +
             "' (pipes, redirections, background jobs and subshells are "
             "not run by the agent)");
      } else {
        out->text += c;
        ++at_;
      }
    }
    return any;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    RINGD_THROW(kInvalidArgument, "exec: " << what << " at column " << at_ + 1 << " of: " << line_);
  }

  void skip_blanks() {
    while (at_ < line_.size() && (line_[at_] == ' ' || line_[at_] == '\t' || line_[at_] == '\n'))
      ++at_;
  }

  void double_quoted(std::string* out) {
    ++at_;
    while (true) {
      if (at_ >= line_.size()) fail("an unterminated \"");
      const char c = line_[at_];
      if (c == '"') {
        ++at_;
        return;
      }
      if (c == '\\' && at_ + 1 < line_.size() &&
          std::string("\"\\$`\n").find(line_[at_ + 1]) != std::string::npos) {
        *out += line_[at_ + 1];
        at_ += 2;
      } else if (c == '$') {
        expand(out);
      } else if (c == '`') {
        fail("'`' (command substitution is not run by the agent)");
      } else {
        *out += c;
        ++at_;
      }
    }
  }

  std::string lookup(const std::string& name) const {
    const auto it = assigned_->find(name);
    if (it != assigned_->end()) return it->second;
    const char* value = env_(name.c_str());
    return value ? value : "";
  }

  // At a '$': $NAME, ${NAME} or ${NAME:-WORD} (WORD literal).
  void expand(std::string* out) {
    if (at_ + 1 < line_.size() && line_[at_ + 1] == '{') {
      const size_t close = line_.find('}', at_ + 2);
      if (close == std::string::npos) fail("an unterminated ${");
      const std::string inside = line_.substr(at_ + 2, close - at_ - 2);
      const size_t colon = inside.find(":-");
      const std::string name = inside.substr(0, colon);
      if (!is_name(name)) fail("'${" + inside + "}' (only ${NAME} and ${NAME:-WORD} expand)");
      std::string value = lookup(name);
      if (value.empty() && colon != std::string::npos) value = inside.substr(colon + 2);
      *out += value;
      at_ = close + 1;
      return;
    }
    size_t end = at_ + 1;
    while (end < line_.size() &&
           (std::isalnum(static_cast<unsigned char>(line_[end])) || line_[end] == '_'))
      ++end;
    const std::string name = line_.substr(at_ + 1, end - at_ - 1);
    if (!is_name(name))
      fail("'$' not followed by a variable name ($(...) is not run by the agent)");
    *out += lookup(name);
    at_ = end;
  }

  const std::string& line_;
  const job::EnvLookup& env_;
  const std::map<std::string, std::string>* assigned_;
  size_t at_ = 0;
};

// "NAME=VALUE" with an unquoted valid NAME: the assignment's parts.
bool split_assignment(const Token& token, std::string* name, std::string* value) {
  const size_t equals = token.text.find('=');
  if (equals == std::string::npos || equals == 0) return false;
  if (!is_name(token.text.substr(0, equals))) return false;
  *name = token.text.substr(0, equals);
  *value = token.text.substr(equals + 1);
  return true;
}

// Open MPI wraps the command in "( test ! -r ./.profile || . ./.profile; ... )" when it believes
// the remote shell is sh or ksh (its local $SHELL, by default). The agent runs no shell and
// sources no profile, so the wrapper is dropped; its contents are parsed as usual.
std::string strip_profile_wrapper(const std::string& line) {
  static const std::string kOpen = "( test ! -r ./.profile || . ./.profile;";
  const size_t first = line.find_first_not_of(" \t");
  if (first == std::string::npos || line.compare(first, kOpen.size(), kOpen) != 0) return line;
  const size_t last = line.find_last_not_of(" \t\n");
  if (line[last] != ')') return line;  // unbalanced: left for the parser to refuse
  return line.substr(first + kOpen.size(), last - first - kOpen.size());
}

}  // namespace

ExecCommand parse_exec_command_line(const std::string& raw_line, const job::EnvLookup& env) {
  const std::string line = strip_profile_wrapper(raw_line);
  ExecCommand command;
  std::map<std::string, std::string> assigned;
  Tokenizer tokenizer(line, env, &assigned);
  std::vector<Token> statement;
  auto record = [&](const std::string& name, const std::string& value) {
    assigned[name] = value;
    command.assignments.emplace_back(name, value);
  };
  Token token;
  bool more = true;
  while (more) {
    more = tokenizer.next(&token);
    if (more && !token.separator) {
      // Assignments take effect word by word, so "A=1 B=$A" sees A (as sh does with ';' between).
      std::string name;
      std::string value;
      if (command.argv.empty() && statement.empty() && split_assignment(token, &name, &value)) {
        record(name, value);
        continue;
      }
      statement.push_back(token);
      continue;
    }
    // The end of a statement: ';' or the end of the line.
    if (more) {  // a ';': what came before must be an export (or nothing but assignments)
      if (statement.empty()) continue;
      if (statement[0].text != "export" || statement[0].quoted) {
        RINGD_THROW(kInvalidArgument,
                    "exec: only NAME=VALUE and 'export NAME' may precede ';', not '"
                        << statement[0].text << "', in: " << line);
      }
      for (size_t i = 1; i < statement.size(); ++i) {
        std::string name;
        std::string value;
        if (split_assignment(statement[i], &name, &value)) {
          record(name, value);
        } else if (!is_name(statement[i].text)) {
          RINGD_THROW(kInvalidArgument,
                      "exec: 'export " << statement[i].text << "' is not a variable name");
        }
      }
      statement.clear();
      continue;
    }
    for (const Token& word : statement) command.argv.push_back(word.text);
  }
  if (command.argv.empty()) {
    RINGD_THROW(kInvalidArgument, "exec: no program to run in: '" << line << "'");
  }
  return command;
}

const std::vector<std::string>& default_allowed_programs() {
  static const std::vector<std::string> programs = {"orted", "prted", "ringd"};
  return programs;
}

std::string join_command_words(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) line += (line.empty() ? "" : " ") + word;
  return line;
}

}  // namespace ringd::launcher
