# Sourced by scripts/test: Clang's thread-safety analysis (common/mutex.h says what it checks)
# over every translation unit of the product (the libraries and programs, not tests/ or bench/)
# that includes common/mutex.h, directly or through another header, with its warnings as
# errors: a member touched without its GUARDED_BY mutex held, or a REQUIRES function called
# without it, fails the run. The annotated members and helpers are private, so the product's own
# units are where a rule can be broken. Syntax only (no code generated, so well under a build's
# time), with each unit's flags from build/compile_commands.json; run it after the build, as the
# units read the generated protobuf headers.

VERDICT_THREAD_SAFETY_PACKAGES=(clang-14)

check_thread_safety() {
  local units failed=0
  # One line per unit: its path, a tab, and the command that checks it.
  units=$(python3 - build/compile_commands.json <<'EOF'
import json, os, re, shlex, sys

root = os.getcwd()
product = ("api", "cli", "common", "delivery", "lobby", "node", "proto", "replication", "server",
           "storage")
include = re.compile(r'^\s*#\s*include\s+"(?:verdict/)?([^"]+)"', re.M)

def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return set(include.findall(f.read()))

# The product's headers that bring in common/mutex.h, to a fixed point.
headers = {}
for top in product:
    for dirpath, _, files in os.walk(os.path.join(root, top)):
        for name in files:
            if name.endswith(".h"):
                full = os.path.join(dirpath, name)
                headers[os.path.relpath(full, root)] = includes(full)
users = {"common/mutex.h"}
while more := {h for h, inc in headers.items() if h not in users and inc & users}:
    users |= more

seen = set()
for entry in json.load(open(sys.argv[1])):
    source = os.path.relpath(entry["file"], root)
    # The product's sources (not tests, benches or sources generated into the build directory),
    # each once (a program is built twice, the second time as its test build).
    if source in seen or not source.startswith(tuple(t + "/" for t in product)):
        continue
    seen.add(source)
    if not includes(source) & users:
        continue
    flags, args = [], iter(shlex.split(entry["command"]))
    for a in args:
        if a == "-isystem":  # its directory is the next argument
            flags += [a, next(args)]
        elif a.startswith(("-D", "-I", "-isystem", "-std=")):
            flags.append(a)
    # Boost 1.74's Asio turns co_await on for Clang only if <experimental/coroutine> exists,
    # which libstdc++ lacks; Clang 14's C++20 coroutines work with libstdc++'s <coroutine>.
    command = ["clang++-14", "-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
               "-DBOOST_ASIO_HAS_CO_AWAIT=1"] + flags + [entry["file"]]
    print(source, f"cd {shlex.quote(entry['directory'])} && {shlex.join(command)}", sep="\t")
EOF
  ) || return 1
  echo "thread-safety analysis (clang++-14 -fsyntax-only -Werror=thread-safety)" \
    "of $(grep -c . <<<"$units") units:"
  cut -f1 <<<"$units" | sed 's/^/  /'
  cut -f2 <<<"$units" | tr '\n' '\0' | xargs -0 -P2 -n1 bash -c || failed=1
  if [ $failed -ne 0 ]; then
    echo "THREAD-SAFETY FAILURE: a lock rule (GUARDED_BY, REQUIRES) is broken; see above"
    return 1
  fi
}
