#!/usr/bin/env bash
# Tool: the SASS of every kernel in two builds compared: a refactor's proof that no kernel changed.
# Compares the SASS of every kernel in two builds, for refactors that must not change the
# generated code: tools/sass_compare.sh OLD_BINARY NEW_BINARY [--rename FROM=TO]... [--diff]
#
# Kernels are matched by their demangled name with every namespace qualifier removed (the
# anonymous-namespace and file-name hashes, and namespaces a refactor moves code between,
# do not count); --rename FROM=TO replaces the text FROM by TO in the old binary's names, for
# kernels that were renamed. Instructions are compared without their addresses and
# encodings, with local labels (.L_x_N) numbered per function. --param-offsets also counts as
# the same a kernel whose instructions are identical but for the offsets of its parameters in
# the constant bank (c[0x0][...]), when old and new offsets correspond one to one throughout
# the kernel: a parameter struct whose fields were regrouped, every instruction reading the
# same field as before ("params-moved"). Prints identical / params-moved / differs / only-old /
# only-new per kernel and a count; --diff also prints a unified diff of each kernel that
# differs. Exit 0 when every kernel is identical (or params-moved), 1 otherwise, 2 on usage
# errors.
# Needs cuobjdump and nvdisasm (CUDA toolkit, or PyPI's nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm), c++filt and python3.
#   tools/sass_compare.sh OLD NEW --param-offsets
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
old=$1 new=$2
shift 2
for f in "$old" "$new"; do
  [[ -f $f ]] || { echo "sass_compare: no such file: $f" >&2; exit 2; }
done
command -v cuobjdump >/dev/null || { echo "sass_compare: cuobjdump not found" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cuobjdump -sass "$old" >"$tmp/old.sass"
cuobjdump -sass "$new" >"$tmp/new.sass"

python3 - "$tmp/old.sass" "$tmp/new.sass" "$@" <<'EOF'
import difflib, re, subprocess, sys

old_path, new_path, *args = sys.argv[1:]
renames, show_diff, param_offsets = [], False, False
i = 0
while i < len(args):
    if args[i] == "--rename" and i + 1 < len(args) and "=" in args[i + 1]:
        renames.append(tuple(args[i + 1].split("=", 1)))
        i += 2
    elif args[i] == "--diff":
        show_diff = True
        i += 1
    elif args[i] == "--param-offsets":
        param_offsets = True
        i += 1
    else:
        sys.exit(f"sass_compare: unknown argument {args[i]!r}")

def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()

QUALIFIER = re.compile(r"(\(anonymous namespace\)|[A-Za-z_][A-Za-z0-9_]*)::")
INSN = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(.*?)\s*;?\s*/\*\s*0x[0-9a-f]+\s*\*/\s*$")
LABEL = re.compile(r"\.L_x_\d+")

def functions(path):
    """{mangled name: [normalised instructions]} of every function in a cuobjdump -sass dump."""
    funcs, name = {}, None
    for line in open(path):
        if "Function :" in line:
            name = line.split("Function :", 1)[1].strip()
            funcs[name] = []
            continue
        if name is None:
            continue
        m = INSN.match(line)
        if m:
            funcs[name].append(m.group(1))
        elif re.match(r"^\s*\.L_x_\d+:", line):
            funcs[name].append(line.strip())
    for body in funcs.values():
        seen = {}
        for k, ins in enumerate(body):
            body[k] = LABEL.sub(lambda m: seen.setdefault(m.group(0), f".L{len(seen)}"), ins)
    return funcs

def keyed(path, apply_renames):
    funcs = functions(path)
    mangled = list(funcs)
    out = {}
    for m, d in zip(mangled, demangle(mangled)):
        key = QUALIFIER.sub("", d)
        if apply_renames:
            for a, b in renames:
                key = key.replace(a, b)
        body = funcs[m]
        if key in out and out[key] != body:  # the same name twice with different code
            n = 2
            while f"{key} #{n}" in out:
                n += 1
            key = f"{key} #{n}"
        out[key] = body
    return out

PARAM = re.compile(r"c\[0x0\]\[(0x[0-9a-f]+)\]")

def params_moved(a, b):
    """Whether a and b are the same instructions but for constant-bank-0 offsets that map one
    to one (each old offset always read as the same new one, and no two as one)."""
    if len(a) != len(b):
        return False
    fwd, back = {}, {}
    for x, y in zip(a, b):
        if PARAM.sub("c[0x0][P]", x) != PARAM.sub("c[0x0][P]", y):
            return False
        for o, n in zip(PARAM.findall(x), PARAM.findall(y)):
            if fwd.setdefault(o, n) != n or back.setdefault(n, o) != o:
                return False
    return True

old, new = keyed(old_path, True), keyed(new_path, False)
counts = {"identical": 0, "params-moved": 0, "differs": 0, "only-old": 0, "only-new": 0}
for key in sorted(set(old) | set(new)):
    if key not in new:
        status = "only-old"
    elif key not in old:
        status = "only-new"
    else:
        status = "identical" if old[key] == new[key] else "differs"
        if status == "differs" and param_offsets and params_moved(old[key], new[key]):
            status = "params-moved"
    counts[status] += 1
    print(f"{status:10} {key}")
    if status == "differs" and show_diff:
        for line in difflib.unified_diff(old[key], new[key], "old", "new", n=2, lineterm=""):
            print("    " + line)
print(", ".join(f"{v} {k}" for k, v in counts.items()) + f" ({len(old)} kernels old, {len(new)} new)")
sys.exit(0 if counts["identical"] + counts["params-moved"] == len(old) == len(new) else 1)
EOF
