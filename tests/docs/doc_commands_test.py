#!/usr/bin/env python3
"""Every ringd command line the docs show is one this ringd accepts, and every command it has is
shown.

Reads README.md, bench/README.md, docs/*.md, k8s/README.md, and the comments of k8s/**/*.yaml and
of bench/*.sh, scripts/*.sh; takes each ringd command line in them, without running it:

  - a line of a fenced code block (`\\` continuations and synopsis lines that go on with `[...]`
    joined), or an inline `code` span (also across line breaks),
  - that starts with ringd or a path ending in /ringd (after `$`, sudo, env, VAR=value), or runs
    one through mpirun: `mpirun -np 4 ringd train ...`, `... mpirun ... build/bin/ringd`,
  - followed by a command word or a flag, and not by a word ending in `:` before any flag
    (`ringd exec: error: ...`, `ringd agent ringd-1: reaped ...` are output, not commands).

Synopses are read as synopses: `[--marker PATH | --no-marker]` uses both flags, `<args ...>`,
HOST:PORT, N, $ORDINAL and `...` are placeholders, `allreduce|broadcast` is each of them. Each
ringd command in a line (`ringd agent ... -- LAUNCH ARGS -- ringd train ...` holds three) is
checked by tests/testing/ringd_cli.py against the binary's --help: the command exists, it takes
the positional words given, and it defines every flag used. Then every command `ringd --help`
lists must appear in some checked command line.

  doc_commands_test.py REPO_ROOT RINGD_BINARY

Prints each problem as FILE:LINE: `command line`: what is wrong; exits 1 if there is any, or if
no command line was found (the extraction itself broke).
"""
import glob
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
import ringd_cli  # noqa: E402  (tests/testing/ringd_cli.py)

MARKDOWN = ["README.md", "bench/README.md", "docs/*.md", "k8s/README.md"]
COMMENTED = ["k8s/**/*.yaml", "bench/*.sh", "scripts/*.sh"]
PREFIXES = {"$", "sudo", "env", "exec", "time", "nohup"}
LAUNCHERS = {"mpirun", "mpiexec"}
SHELL_OPERATORS = {";", "&&", "||", "&", ">", ">>", "<", "2>", "2>&1", "|"}
COMMAND_WORD = re.compile(r"[a-z][a-z0-9-]*")
INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
# A line of prose that starts a block of its own, so that no code span runs across it.
BLOCK_START = re.compile(r"^\s*(#|\||[-*+] |\d+\. |>)")


def tokens_of(text):
    try:
        return shlex.split(text)
    except ValueError:  # an unmatched quote in prose, e.g. `'…'`
        return text.split()


def command_words(text):
    """The words of the ringd command line that TEXT is, from ringd on, synopsis brackets and
    placeholders resolved; None when TEXT is not a ringd command line."""
    tokens = tokens_of(text)
    i = 0
    while i < len(tokens) and (tokens[i] in PREFIXES or re.match(r"[A-Za-z_]\w*=", tokens[i])):
        i += 1
    if i < len(tokens) and ringd_cli.is_ringd(tokens[i]):
        start = i
    else:
        launcher = next((j for j in range(i, len(tokens)) if tokens[j] in LAUNCHERS), None)
        if launcher is None:
            return None
        start = next((j for j in range(launcher, len(tokens)) if ringd_cli.is_ringd(tokens[j])),
                     None)
        if start is None:
            return None
    words = []
    square = angle = 0  # inside [optional ...] / <placeholder ...>
    for token in tokens[start:]:
        if square == 0 and angle == 0 and (token in SHELL_OPERATORS or token[0] in "#("):
            break
        if token.startswith("<") and not token.startswith("<<"):
            angle += 1
        if angle:
            angle -= token.endswith(">")
            continue
        opened = len(token) - len(token.lstrip("["))
        word = token.lstrip("[").rstrip(".")
        closed = len(word) - len(word.rstrip("]"))
        word = word.rstrip("]").rstrip(".") or ("..." if token.endswith("...") else "")
        square += opened
        if word and word != "|" and (square == 0 or ringd_cli.is_flag(word)):
            words.append(word)
        square = max(0, square - closed)
    if len(words) < 2 or not (ringd_cli.is_flag(words[1]) or COMMAND_WORD.fullmatch(words[1])):
        return None
    for word in words[2:]:  # a message such as `ringd agent ringd-1: reaped ...`, not a command
        if ringd_cli.is_flag(word):
            break
        if word.endswith(":"):
            return None
    return words


def code_lines(lines, first):
    """(line number, text) of each logical line of a fenced block: `\\` continuations and
    synopsis lines that go on with `[...]` joined to the line they continue."""
    logical = []
    for number, line in enumerate(lines, first):
        text = line.rstrip()
        continues = logical and (logical[-1][1].endswith("\\") or
                                 (line[:1].isspace() and text.lstrip().startswith("[")))
        if continues:
            logical[-1][1] = logical[-1][1].rstrip("\\") + " " + text.strip()
        else:
            logical.append([number, text])
    return [(number, text) for number, text in logical]


def code_spans(lines, first):
    """(line number, text) of each inline `code` span of prose LINES (line `first` onwards)."""
    spans = []
    blocks = []  # (first line number, lines)
    after_blank = True
    for number, line in enumerate(lines, first):
        if not line.strip():
            after_blank = True
            continue
        if after_blank or BLOCK_START.match(line):
            blocks.append((number, []))
        blocks[-1][1].append(line)
        after_blank = False
    for number, block in blocks:
        text = "".join(block)
        for match in INLINE_CODE.finditer(text):
            spans.append((number + text.count("\n", 0, match.start()),
                          " ".join(match.group(2).split())))
    return spans


def markdown_candidates(path):
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    candidates = []
    prose, fence, start = [], None, 1
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            if fence is None:
                candidates += code_spans(prose, start)
                fence, prose = [], []
            else:
                candidates += code_lines(fence, start)
                fence, prose = None, []
            start = number + 1
        elif fence is not None:
            fence.append(line)
        else:
            prose.append(line)
    candidates += code_spans(prose, start)
    return candidates


def comment_candidates(path):
    """Inline `code` spans of the file's # comments (a run of comment lines is one paragraph;
    other lines stand for blank ones)."""
    lines = []
    for line in open(path, encoding="utf-8"):
        match = re.match(r"\s*#(?!!)\s?(.*)", line)
        lines.append(match.group(1) + "\n" if match else "\n")
    return code_spans(lines, 1)


def main():
    repo, binary = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    ringd_help = ringd_cli.RingdHelp(binary)
    if ringd_help.text([]) is None:
        print(f"doc_commands: FAILED: {binary} --help does not answer", file=sys.stderr)
        return 1
    sources = []
    for patterns, read in ((MARKDOWN, markdown_candidates), (COMMENTED, comment_candidates)):
        for pattern in patterns:
            for path in sorted(glob.glob(os.path.join(repo, pattern), recursive=True)):
                sources.append((os.path.relpath(path, repo), read(path)))

    problems = []
    used = set()
    lines = commands = 0
    for name, candidates in sources:
        for number, text in candidates:
            words = command_words(text)
            if words is None:
                continue
            lines += 1
            for command in ringd_cli.split_commands(words):
                commands += 1
                if len(command) > 1 and not ringd_cli.is_flag(command[1]):
                    used.add(command[1])
                for problem in ringd_cli.check_command(ringd_help, command):
                    problems.append(f"{name}:{number}: `{text.strip()}`: {problem}")

    top = ringd_help.text([])
    listed = re.findall(r"^  ([a-z][a-z0-9-]*)\s", top.split("Subcommands:", 1)[-1], re.M)
    for command in listed:
        if command not in used:
            problems.append(f"`ringd {command}` (in `ringd --help`) is in no documented command "
                            "line")

    for problem in problems:
        print(f"doc_commands: FAILED: {problem}", file=sys.stderr)
    print(f"doc_commands: {lines} command lines ({commands} ringd commands) in "
          f"{len(sources)} files checked against {binary}: {len(problems)} problems",
          file=sys.stderr)
    if lines == 0:
        print("doc_commands: FAILED: no ringd command line found: the extraction is broken",
              file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
