#!/usr/bin/env python3
"""Every verdict-node and verdict-lobby flag that README.md and docs/ show exists in --help.

    check_flags.py SOURCE_DIR PROGRAM...   (PROGRAM: a path to verdict-node, verdict-lobby, ...)

Each program's --help is read, and its subcommands' (recursively, from the "Subcommands:" list),
for the long flags each command takes. Then every command line of the docs (in fenced blocks,
with backslash continuations, and in `inline code`) that runs one of the programs is walked the
way CLI11 parses it: a word naming a subcommand descends into it, and each --flag must be one of
that command's or of a command above it. A --flag shown elsewhere (in prose: "`--batch N` is
...", a YAML args list) must be a flag of some command of the programs, unless the line runs
another program (curl, etcd, pg_autoctl, ...) or the flag is one of OTHER_PROGRAMS_FLAGS below.
Exits 1, naming each unknown flag with its file and line. Quick: a few --help runs.
"""
import os
import re
import subprocess
import sys

from check_links import FENCE, INLINE_CODE, pages

# Flags of programs other than verdict's that the docs name in prose, outside a command line of
# theirs; each with the program it belongs to.
OTHER_PROGRAMS_FLAGS = {
    "--quota-backend-bytes": "etcd",
    "--auto-compaction-mode": "etcd",
    "--auto-compaction-retention": "etcd",
    "--max-txn-ops": "etcd",
    "--max-request-bytes": "etcd",
    "--fast": "scripts/lib/ha.sh",
    "--async": "scripts/lib/ha.sh",
}
# Commands whose flags are their own business; a line that runs one is not checked.
OTHER_PROGRAMS = {
    "curl", "cmake", "cpack", "ctest", "apt", "apt-get", "dpkg", "psql", "createdb", "createuser",
    "dropdb", "pg_virtualenv", "pg_autoctl", "pg_ctl", "initdb", "etcd", "etcdctl", "systemctl",
    "journalctl", "kubectl", "watch", "git", "go", "python3", "promtool", "pgbench", "ha.sh",
    "scripts/lib/ha.sh", "grep", "sed", "awk", "tail", "head", "ls", "mkdir", "rm", "printf",
    "kill", "pidof", "editor", "sudo", "docker", "dotnet", "mcs", "mono", "npm", "npx",
    "clang-format", "duplicates", "debootstrap", "time",
}
# A pattern such as `--unsafe-*` names no one flag.
LONG_FLAG = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)(?![\w*-])")


class Command:
    def __init__(self, name, parent=None):
        self.name, self.parent, self.flags, self.subcommands = name, parent, set(), {}

    def path(self):
        return (self.parent.path() + " " if self.parent else "") + self.name

    def knows(self, flag):
        return flag in self.flags or (self.parent is not None and self.parent.knows(flag))

    def all_flags(self):
        found = set(self.flags)
        for sub in self.subcommands.values():
            found |= sub.all_flags()
        return found


def read_help(binary, words, parent=None):
    """The command tree under `binary words...`, from --help."""
    out = subprocess.run([binary, *words, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        sys.exit(f"{binary} {' '.join(words)} --help exited {out.returncode}: {out.stderr}")
    command = Command(words[-1] if words else os.path.basename(binary), parent)
    section = None
    for line in out.stdout.splitlines():
        if re.match(r"^\S.*:$", line):
            section = "subcommands" if line.startswith("Subcommands") else "options"
            continue
        if section == "options":
            m = re.match(r"^\s+(?:-\w,)?--([a-z0-9][a-z0-9-]*)", line)
            if m:
                command.flags.add(m.group(1))
        elif section == "subcommands":
            m = re.match(r"^\s+([a-z][a-z0-9-]*)\s", line + " ")
            if m and not line.startswith("    " * 3):
                command.subcommands[m.group(1)] = None
    if not command.flags:
        sys.exit(f"{binary} {' '.join(words)} --help lists no flags: is its format still CLI11's?")
    for name in list(command.subcommands):
        command.subcommands[name] = read_help(binary, [*words, name], command)
    return command


def logical_lines(path):
    """(line number, text, in_code_block): code blocks joined over trailing backslashes."""
    fence, pending, start = None, "", 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if m:
                fence = m.group(1) if fence is None else (None if m.group(1) == fence else fence)
                continue
            if fence is None:
                yield number, line, False
                continue
            if not pending:
                start = number
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            yield start, pending + line, True
            pending = ""


def segments(text):
    """The simple commands of a shell line: split at |, ;, &&, ||, & and comments."""
    text = re.sub(r"(^|\s)#.*$", "", text)
    return [s for s in re.split(r"\|\||&&|[|;&]|\$\(|\)", text) if s.strip()]


def words_of(segment):
    return [w.strip("[]\"',()") for w in segment.split()]


def program_at(word, programs):
    """The program a word runs (verdict-node, build/node/verdict-node, ExecStart=/usr/bin/...)."""
    base = re.split(r"[=/]", word)[-1]
    return programs.get(base)


class Checker:
    def __init__(self, programs):
        self.programs = programs  # name -> Command
        self.every_flag = set().union(*(p.all_flags() for p in programs.values()))
        self.problems, self.checked = [], 0

    def command_line(self, where, words):
        """Walks `words` (words[0] runs a program) as CLI11 parses it."""
        command = self.programs[re.split(r"[=/]", words[0])[-1]]
        for word in words[1:]:
            flag = LONG_FLAG.match(word)
            if flag:
                self.checked += 1
                if not command.knows(flag.group(1)):
                    self.problems.append(f"{where}: {command.path()} has no --{flag.group(1)}")
            elif word in command.subcommands:
                command = command.subcommands[word]

    def other_text(self, where, text):
        for flag in LONG_FLAG.findall(text):
            self.checked += 1
            if flag not in self.every_flag and "--" + flag not in OTHER_PROGRAMS_FLAGS:
                names = ", ".join(sorted(self.programs))
                self.problems.append(f"{where}: --{flag} is a flag of none of {names}")

    def text(self, where, text):
        for segment in segments(text):
            words = words_of(segment)
            for i, word in enumerate(words):
                if program_at(word, self.programs):
                    self.command_line(where, words[i:])
                    break
            else:
                if not any(w in OTHER_PROGRAMS or w.endswith("/ha.sh") for w in words):
                    self.other_text(where, segment)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    root = os.path.abspath(sys.argv[1])
    programs = {}
    for binary in sys.argv[2:]:
        command = read_help(binary, [])
        programs[os.path.basename(binary)] = command
    checker = Checker(programs)
    for page in pages(root):
        for number, line, in_code in logical_lines(page):
            where = f"{os.path.relpath(page, root)}:{number}"
            if in_code:
                checker.text(where, line)
            else:
                for code in INLINE_CODE.findall(line):
                    checker.text(where, code[1])
    for problem in checker.problems:
        print(problem)
    if checker.checked == 0:
        sys.exit("no flags found in the docs: the test looked in the wrong place")
    print(f"{checker.checked} flags checked, {len(checker.problems)} unknown")
    sys.exit(1 if checker.problems else 0)


if __name__ == "__main__":
    main()
