"""Whether a ringd command line uses only commands and flags a built ringd has, asked of its --help.

A command line as written somewhere (a doc, a manifest) may hold several ringd commands:

  ringd agent --http-port 29401 -- --iface eth0 -- ringd train --epochs 1
  `---------- agent ----------'    `-- launch -'    `------ train -------'

split_commands() cuts it into them (the agent hands the words after its first `--` to
`ringd launch`; launch runs the words after its `--`; exec runs the words after HOST), and
check_command() checks each: `ringd WORDS --help` answers with that command's help (the command
exists, and bench's collective is one it accepts), the command takes no positional word it does
not list, and every flag used is one its help defines. Only `ringd ... --help` ever runs, so no job
starts. Why flags are looked up in the help text instead of given to the parser: CLI11 answers
--help before it looks at the other arguments, so `ringd train --no-such-flag --help` exits 0.

Used by tests/docs/doc_commands_test.py (every command line in the docs) and
tests/k8s/check_manifests.py (the pod commands of the rendered manifests).
"""
import re
import subprocess

# A flag as a help text defines it: CLI11 lists options two spaces in ("  -b,--minbytes SIZE"),
# hand-written usages (ringd exec) in brackets ("[--port PORT]").
_OPTION_LINE = re.compile(r"^  (-{1,2}[A-Za-z0-9][\w-]*(?:,\s*-{1,2}[A-Za-z0-9][\w-]*)*)", re.M)
_BRACKETED = re.compile(r"\[(-{1,2}[A-Za-z0-9][\w-]*)")
FLAG = re.compile(r"-{1,2}[A-Za-z0-9][\w-]*")
# Words that stand for something (HOST:PORT, N, LAUNCH_ARGS..., $ORDINAL, <ns>, ...).
_PLACEHOLDER = re.compile(r"^([A-Z0-9_:.,/]+|\.\.\.|\$.*|<.*>?|.*>)$")
EXEC_OPTIONS_WITH_VALUE = ("--port", "--timeout")  # src/cli/agent_command.cc, exec


def is_ringd(word):
    return word == "ringd" or word.endswith("/ringd")


def is_flag(word):
    return word.startswith("-") and word != "-"


def is_placeholder(word):
    return bool(_PLACEHOLDER.match(word))


class RingdHelp:
    """The --help texts of one ringd binary, each asked once."""

    def __init__(self, binary):
        self.binary = binary
        self.cache = {}

    def text(self, words):
        """--help text of `ringd WORDS...`, or None when the binary has no such command: it fails,
        or answers with other help than the command's own (the top-level help, perhaps with a
        suggestion, is what an unknown word before --help gets)."""
        key = tuple(words)
        if key not in self.cache:
            result = subprocess.run([self.binary, *words, "--help"], capture_output=True,
                                    text=True, timeout=30)
            text = result.stdout + result.stderr
            known = result.returncode == 0 and "usage" in text.lower()
            if known and words:
                usage = re.search(r"usage:?\s*(.*)", text, re.I)
                known = (text != self.text([]) and usage is not None and
                         re.search(rf"\bringd {re.escape(words[0])}\b", usage.group(1)) is not None)
            self.cache[key] = text if known else None
        return self.cache[key]

    def refusal(self, words):
        """The first line `ringd WORDS... --help` prints, for a message on why it was refused."""
        result = subprocess.run([self.binary, *words, "--help"], capture_output=True, text=True,
                                timeout=30)
        lines = (result.stderr or result.stdout).strip().splitlines()
        return f"exit {result.returncode}: {lines[0] if lines else 'no output'}"


def defined_flags(help_text):
    flags = {"-h", "--help"}  # every ringd command answers both (CLI11, and exec's own parser)
    for match in _OPTION_LINE.finditer(help_text):
        flags.update(f.strip() for f in match.group(1).split(","))
    flags.update(_BRACKETED.findall(help_text))
    return flags


def positionals(help_text, path):
    """Positional words the usage line of `ringd PATH` names after its options (bench:
    ["collective"]), or None when the help has no usage line to read them from."""
    match = re.search(r"^Usage:\s*(.*)$", help_text, re.M)
    if not match:
        return None
    usage = match.group(1)
    while re.search(r"\[[^\[\]]*\]", usage):
        usage = re.sub(r"\[[^\[\]]*\]", " ", usage)
    words = usage.split()
    named = ["ringd", *path]
    return [w for w in words if w not in named and w != "SUBCOMMAND"]


def split_commands(words):
    """`ringd agent A -- L -- ringd train T` -> [ringd agent A], [ringd launch L], [ringd train T].

    An agent's words after its first `--` are `ringd launch`'s; launch's words after its `--` are
    the command mpirun runs, and exec's words after HOST the command it runs: checked too when
    they are a ringd command. An exec command keeps only its options (not HOST and the rest).
    """
    if len(words) < 2 or not is_ringd(words[0]):
        return [words]
    command = words[1]
    if command == "agent" and "--" in words:
        cut = words.index("--")
        return [words[:cut]] + split_commands(["ringd", "launch", *words[cut + 1:]])
    if command == "launch" and "--" in words:
        cut = words.index("--")
        rest = words[cut + 1:]
        return [words[:cut]] + (split_commands(rest) if rest and is_ringd(rest[0]) else [])
    if command == "exec":
        i = 2
        while i < len(words) and is_flag(words[i]):
            if words[i] == "--":
                break
            i += 2 if words[i] in EXEC_OPTIONS_WITH_VALUE else 1
        own = words[:i]
        i += 1 if i < len(words) and words[i] == "--" else 0
        rest = words[i + 1:]  # after HOST
        return [own] + (split_commands(rest) if rest and is_ringd(rest[0]) else [])
    return [words]


def check_command(ringd_help, words, allow=lambda command, flag: False):
    """Problems of one ringd command (words[0] is ringd; split_commands gives these), each a
    sentence naming the command and what it lacks; [] when the binary accepts all of it.

    allow(command, flag) may excuse a flag the binary lacks (a manifest ahead of the code)."""
    path = [] if len(words) < 2 or is_flag(words[1]) else [words[1]]
    help_text = ringd_help.text(path)
    if help_text is None:
        return [f"`ringd {words[1]}` is not a command of this ringd (`ringd --help` lists them)"]
    rest = words[1 + len(path):]
    leading = []
    while rest and not is_flag(rest[0]):
        leading.append(rest.pop(0))
    leading = [w for w in leading if not is_placeholder(w)]
    problems = []
    named = positionals(help_text, path) if path else []
    if leading and named is not None and not named:
        problems.append(f"`ringd {' '.join(path)}` takes no positional word, given "
                        f"{' '.join(leading)} (`ringd {' '.join(path)} --help`)")
    elif leading and named:
        # bench: the collective, or `replay`, which has a parser (and a help) of its own. Each of
        # `allreduce|broadcast` is asked for.
        helps = []
        for alternative in leading[0].split("|"):
            text = ringd_help.text([*path, alternative])
            if text is None:
                problems.append(f"`ringd {' '.join(path)} {alternative}` is refused "
                                f"({ringd_help.refusal([*path, alternative])})")
            else:
                helps.append(text)
        if helps:
            help_text = helps[0]
            path = [*path, leading[0]]
    name = " ".join(["ringd", *path])
    defined = defined_flags(help_text)
    for word in rest:
        if not is_flag(word) or word == "--":
            continue
        flag = word.split("=", 1)[0]
        if not FLAG.fullmatch(flag):
            problems.append(f"`{name}`: {word!r} is not a flag (a typo in the command line?)")
        elif flag not in defined and not allow(name, flag):
            problems.append(f"`{name}` has no flag {flag} (`{name} --help`)")
    return problems
