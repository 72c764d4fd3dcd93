#!/usr/bin/env python3
"""Every attnbench command that README.md and docs/*.md show, run as written (issue 46).

    python3 tests/doc_commands.py --binary build/bin/attnbench [--source DIR] [--list] [-v]

Which commands: the fenced code blocks of README.md and docs/*.md. In a block tagged
sh, bash, shell or console every line is shell (a leading `$ ` prompt is dropped); in
any other block only `$ ` lines are, the rest being output or a usage synopsis. Lines
ending in `\\`, `&&`, `||` or `|` continue on the next; `#` comments are dropped. A
logical line is split at `&&`, `||`, `;` and `|`; each simple command whose program is
attnbench (`attnbench`, `build/bin/attnbench`, or after a wrapper: srun, ncu, nsys,
env, time, compute-sanitizer) is run, without redirections and without what it is piped
into; a quoted word that holds attnbench commands (sbatch --wrap '...') is read the
same way. Other programs (cmake, ncu -i, python3, sbatch) are not run.

How: each line's commands run, in order, with the built binary in a new scratch directory that
looks like the source tree the docs are written from (cases/, kernels/, app/ linked;
build/bin/attnbench the binary under test), through bash, so quotes, globs and
variables are a shell's; SLURM_ARRAY_TASK_ID is 0. The scratch directory holds json
reports under the names the docs use (the table FILES below: tests/docs/, written by
tests/docs/make-fixtures.py) and my_softmax.cu as docs/plugins.md's tutorial shows
it; PLACEHOLDERS replaces a word the docs leave for the reader.

What passes: `run` and `verify` get `--dry-run` (placed before their first option,
else at the end) and must exit 0, which needs no GPU; `list`, `--help`, `--version`,
`compare`, `merge`, `report` must exit 0 as written. What needs a GPU to mean
anything, `info` and `--devices all` (which counts the GPUs), must exit 0, or exit 3
with one line on stderr saying there is no usable GPU; they are listed as such.

Inline examples: every pattern a doc shows as `-k PATTERN` or `--exclude PATTERN` in
running text must match a variant of `attnbench list kernels` (with the tutorial's
plugin), as `-k` requires; upper-case words (NAME, VARIANT) are placeholders.

Opting out: `<!-- doc-test: skip (reason) -->` on a line before a block (blank lines
between allowed) skips the whole block; the skipped commands are printed with the
reason. Keep it rare: a command that cannot run here is better fixed than skipped.

Also checked: the report schema the docs call current is docs/report.schema.json's; README.md's "Two commands" block holds exactly two commands, the first
ending in `build/bin/attnbench verify all` (run above, with --dry-run) and the second
in `ctest ...`, and .ci/run runs the second verbatim.

Exit 0 when every command passed, 1 otherwise (each failure with the doc's file:line,
the command run and its output).
"""
import argparse
import fnmatch
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHELL_LANGS = {"sh", "bash", "shell", "console", "shell-session"}
WRAPPERS = {"srun", "ncu", "nsys", "env", "time", "compute-sanitizer", "sudo"}
SKIP = re.compile(r"<!--\s*doc-test:\s*skip\s*\((.+?)\)\s*-->")
OPERATORS = ("&&", "||", ">>", ">&", "&>", "|", ";", ">", "<", "&")
# File names the docs use -> fixture (relative to tests/docs/) copied there in the scratch directory.
FILES = {
    "base.json": "base.json",
    "new.json": "new.json",
    "today.json": "new.json",
    "run.json": "new.json",
    "perf.json": "new.json",
    "peers-old.json": "peers-old.json",
    "peers-report.json": "peers-report.json",
    "results/part-0.json": "part-0.json",
    "results/part-1.json": "part-1.json",
}
# Words the docs leave for the reader to fill in (an unquoted word exactly equal) -> what runs.
PLACEHOLDERS = {"NAME": "warp_online", "/tmp/dump": "dump"}
NO_GPU = re.compile(r"GPU|CUDA|device", re.I)
TIMEOUT_S = 300


class Word:
    """One shell word: raw as written (quotes kept) and its value (quotes removed)."""

    def __init__(self, raw, value, op=False):
        self.raw, self.value, self.op = raw, value, op

    def __repr__(self):
        return self.raw


def lex(line):
    """A POSIX shell line as words and operators, with comments dropped. Enough of the shell
    for documentation: quotes, backslashes, $(...) and ${...} kept inside their word."""
    words, i, n = [], 0, len(line)
    while i < n:
        c = line[i]
        if c in " \t":
            i += 1
            continue
        if c == "#":
            break
        op = next((o for o in OPERATORS if line.startswith(o, i)), None)
        if op:
            words.append(Word(op, op, op=True))
            i += len(op)
            continue
        start, value = i, []
        while i < n and line[i] not in " \t" and not any(line.startswith(o, i) for o in OPERATORS):
            c = line[i]
            if c == "'":
                j = line.find("'", i + 1)
                j = n if j < 0 else j
                value.append(line[i + 1:j])
                i = j + 1
            elif c == '"':
                i += 1
                while i < n and line[i] != '"':
                    if line[i] == "\\" and i + 1 < n:
                        i += 1
                    value.append(line[i])
                    i += 1
                i += 1
            elif c == "\\" and i + 1 < n:
                value.append(line[i + 1])
                i += 2
            elif c == "$" and i + 1 < n and line[i + 1] in "({":
                close, depth, j = ")" if line[i + 1] == "(" else "}", 0, i + 1
                while j < n:
                    depth += line[j] == line[i + 1]
                    depth -= line[j] == close
                    j += 1
                    if depth == 0:
                        break
                value.append(line[i:j])
                i = j
            else:
                value.append(c)
                i += 1
        words.append(Word(line[start:i], "".join(value)))
    return words


def simple_commands(words):
    """Split at && || ; | &, drop redirections; yield each simple command's words."""
    cmd, skip_next = [], False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w.op and w.value in ("&&", "||", ";", "|", "&"):
            if cmd:
                yield cmd
            cmd = []
        elif w.op:  # a redirection: drop it and its target
            skip_next = True
        else:
            cmd.append(w)
    if cmd:
        yield cmd


def is_attnbench(word):
    return not word.op and (word.value == "attnbench" or word.value.endswith("/attnbench"))


def attnbench_commands(line):
    """The attnbench commands of one logical shell line, each as a list of words from the program on."""
    for cmd in simple_commands(lex(line)):
        k = 0
        while k < len(cmd) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", cmd[k].value):
            k += 1  # VAR=value before the program
        if k < len(cmd) and is_attnbench(cmd[k]):
            yield cmd[k:]
            continue
        if k < len(cmd) and os.path.basename(cmd[k].value) in WRAPPERS:
            at = next((j for j in range(k + 1, len(cmd)) if is_attnbench(cmd[j])), None)
            if at is not None:
                yield cmd[at:]
                continue
        for w in cmd[k + 1:]:  # a quoted shell string (sbatch --wrap '...')
            if re.search(r"(^|[\s/])attnbench\s", w.value) and w.raw[:1] in "'\"":
                yield from attnbench_commands(w.value)


def doc_commands(path, rel):
    """(file:line, logical line, [attnbench commands], skip reason or None) for each shell line of one doc."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, in_block, lang, skip, pending_skip = [], False, "", None, None
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if not in_block:
            m = SKIP.search(lines[i])
            if m:
                pending_skip = m.group(1)
            elif s.startswith("```"):
                in_block, lang, skip, pending_skip = True, s[3:].strip().lower(), pending_skip, None
            elif s:
                pending_skip = None
            i += 1
            continue
        if s.startswith("```"):
            in_block = False
            i += 1
            continue
        start, text = i, s
        shell = lang in SHELL_LANGS
        if text.startswith("$ "):
            text, shell = text[2:], True
        elif text == "$":
            text = ""
        i += 1
        if not shell:
            continue
        # Continuations: a trailing backslash, or a line ending in an operator.
        while i < len(lines) and (text.endswith("\\") or re.search(r"(&&|\|\||\|)\s*$", text)):
            if lines[i].strip().startswith("```"):
                break
            text = (text[:-1] if text.endswith("\\") else text) + " " + lines[i].strip()
            i += 1
        if text.startswith("#") or not text:
            continue
        cmds = list(attnbench_commands(text))
        if cmds:
            out.append((f"{rel}:{start + 1}", text, cmds, skip))
    return out


def tutorial_plugin(source):
    """The files docs/plugins.md says to save: {"my_softmax.cu": text, "my_softmax.py": text}."""
    with open(os.path.join(source, "docs", "plugins.md"), encoding="utf-8") as f:
        text = f.read()
    out = {}
    for name, lang in (("my_softmax.cu", "cuda"), ("my_softmax.py", "python")):
        m = re.search(r"Save this as `" + re.escape(name) + r"`.*?```" + lang + r"\n(.*?)```", text, re.S)
        if not m:
            raise SystemExit(f"tests/doc_commands.py: docs/plugins.md has no ```{lang} block after \"Save this as `{name}`\"")
        out[name] = m.group(1)
    return out


def python_plugins_usable():
    """Whether the python3 here can run the docs' Python plugins (they import torch and triton);
    where it cannot, their command lines are listed as not run, as GPU-only lines are."""
    p = subprocess.run(["python3", "-c", "import torch, triton"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p.returncode == 0


def scratch(binary, source, plugin_text):
    d = tempfile.mkdtemp(prefix="attnbench-doc-")
    for sub in ("cases", "kernels", "app", "tests"):
        os.symlink(os.path.join(source, sub), os.path.join(d, sub))
    os.makedirs(os.path.join(d, "build", "bin"))
    os.symlink(binary, os.path.join(d, "build", "bin", "attnbench"))
    os.makedirs(os.path.join(d, "bin"))
    os.symlink(binary, os.path.join(d, "bin", "attnbench"))  # `attnbench ...` on PATH
    for name, fixture in FILES.items():
        os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
        shutil.copy(os.path.join(HERE, "docs", fixture), os.path.join(d, name))
    for name, text in plugin_text.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return d


def prepare(words):
    """The command line to run, and the subcommand."""
    raw = ["build/bin/attnbench"] + [PLACEHOLDERS.get(w.raw, w.raw) for w in words[1:]]
    values = [w.value for w in words[1:]]
    sub = next((v for v in values if not v.startswith("-")), None)
    first = values[0] if values else None
    if first in ("--help", "-h", "--version"):
        sub = first
    if sub in ("run", "verify") and "--dry-run" not in values:
        k = values.index(sub) + 1
        at = next((j for j in range(k, len(values)) if values[j].startswith("-")), len(values))
        raw.insert(at + 1, "--dry-run")
    return " ".join(raw), sub


PYTHON_PLUGINS_USABLE = python_plugins_usable()


def run_line(where, cmds, binary, source, plugin_text, verbose, no_gpu):
    """The attnbench commands of one logical line, in order, in one new scratch directory (a merge
    writes what the report after it reads). True when each passed."""
    d = scratch(binary, source, plugin_text)
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="0", PATH=os.path.join(d, "bin") + os.pathsep + os.environ["PATH"])
    env.pop("ATTNBENCH_CASES", None)
    ok_all = True
    try:
        for words in cmds:
            line, sub = prepare(words)
            if re.search(r"--plugin[ =]\S+\.py( |$)", line) and not PYTHON_PLUGINS_USABLE:
                no_gpu.append(f"{where}: {line} (a Python plugin; this python3 has no torch/triton)")
                continue
            try:
                p = subprocess.run(["bash", "-c", line], cwd=d, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, errors="replace", timeout=TIMEOUT_S)
                rc, out, err = p.returncode, p.stdout, p.stderr
            except subprocess.TimeoutExpired as e:
                rc, out, err = "timeout", "", f"timed out after {TIMEOUT_S} s"
            ok = rc == 0
            needs_gpu = sub == "info" or re.search(r"(^| )--devices[ =]all( |$)", line)
            if needs_gpu and rc == 3:
                lines = [x for x in err.splitlines() if x.strip()]
                ok = len(lines) == 1 and bool(NO_GPU.search(lines[0]))
                if ok:
                    no_gpu.append(f"{where}: {line}")
            if verbose or not ok:
                print(f"{'ok' if ok else 'FAILED':6} {where}: {line}   (exit {rc})")
            if not ok:
                for text in (out, err):
                    for x in text.splitlines()[-15:]:
                        print(f"         | {x[:300]}")
            ok_all = ok_all and ok
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return ok_all


def inline_patterns(docs, source, binary, plugin_text):
    """`-k PATTERN` / `--exclude PATTERN` in running text: each must match some variant."""
    d = scratch(binary, source, plugin_text)
    try:
        p = subprocess.run([binary, "list", "kernels", "--plugin", "my_softmax.cu"], cwd=d, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, errors="replace", timeout=TIMEOUT_S)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if p.returncode != 0:
        return [f"attnbench list kernels --plugin my_softmax.cu: exit {p.returncode}: {p.stderr.strip()[:300]}"]
    variants = {m.group(1) for m in re.finditer(r"^  (\S+)", p.stdout, re.M)}
    errors, checked = [], 0
    for path in docs:
        rel = os.path.relpath(path, source)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"`(?:-k|--kernel|--exclude) ('[^'`]+'|[^\s`']+)`", text):
            pattern = m.group(1).strip("'")
            if re.fullmatch(r"[A-Z_]+", pattern):
                continue
            checked += 1
            if not fnmatch.filter(variants, pattern):
                line = text.count("\n", 0, m.start()) + 1
                errors.append(f"{rel}:{line}: {m.group(0)} matches no variant of `attnbench list kernels`")
    if checked == 0:
        errors.append("no inline -k/--exclude examples found: is the extraction broken?")
    return errors


def usage_lines(docs, source, binary):
    """Usage synopses (`attnbench SUB ...` lines in untagged blocks): SUB exists and takes every
    option the line shows (its --help lists them)."""
    errors, helps = [], {}
    for path in docs:
        rel = os.path.relpath(path, source)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        in_block, lang = False, ""
        for n, line in enumerate(lines, 1):
            s = line.strip()
            if s.startswith("```"):
                in_block, lang = (not in_block), s[3:].strip().lower()
                continue
            if not in_block or lang or not s.startswith("attnbench "):
                continue
            words = s.split()
            sub = words[1] if not words[1].startswith("-") else ""
            if sub not in helps:
                p = subprocess.run([binary] + ([sub] if sub else []) + ["--help"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace", timeout=TIMEOUT_S)
                helps[sub] = (p.returncode, p.stdout)
            rc, text = helps[sub]
            if rc != 0:
                errors.append(f"{rel}:{n}: `attnbench {sub} --help` exits {rc}: no such subcommand?")
                continue
            for opt in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", s):
                if not re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", text):
                    errors.append(f"{rel}:{n}: `attnbench {sub}` shows {opt}, which its --help does not list")
    return errors


def schema_numbers(docs, source):
    """The report schema the docs name as current (`"schema": N` in a layout, "schema(s) 1 to N")
    is docs/report.schema.json's."""
    import json
    with open(os.path.join(source, "docs", "report.schema.json"), encoding="utf-8") as f:
        current = json.load(f)["properties"]["schema"]["const"]
    errors = []
    for path in docs:
        rel = os.path.relpath(path, source)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r'"schema": (\d+)|schemas? (?:other than )?1\s+to\s+(\d+)', text):
            n = int(m.group(1) or m.group(2))
            if n != current:
                line = text.count("\n", 0, m.start()) + 1
                errors.append(f"{rel}:{line}: `{m.group(0)}`, but the report schema is {current} "
                              "(docs/report.schema.json)")
    return errors


def two_commands(source):
    """README's two commands: exactly two in the block under "## Two commands"; .ci/run runs the second."""
    errors = []
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    m = re.search(r"^## Two commands\n.*?```sh\n(.*?)```", readme, re.S | re.M)
    if not m:
        return ["README.md: no ```sh block under \"## Two commands\""]
    cmds = [x.strip() for x in m.group(1).splitlines() if x.strip() and not x.strip().startswith("#")]
    if len(cmds) != 2:
        return [f"README.md: \"Two commands\" shows {len(cmds)} commands, not 2: {cmds}"]
    first, second = cmds
    if not (first.startswith(".ci/deps && ") and first.endswith("build/bin/attnbench verify all")):
        errors.append(f"README.md: the first command should install, build and run `verify all`: {first}")
    if not (second.startswith(".ci/deps && ") and " ctest " in f" {second} "):
        errors.append(f"README.md: the second command should install, build and run ctest: {second}")
    with open(os.path.join(source, ".ci", "run"), encoding="utf-8") as f:
        ci = [x.strip() for x in f.read().splitlines()]
    if second not in ci:
        errors.append(f".ci/run does not run README's second command verbatim: {second}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True, help="the attnbench binary under test")
    ap.add_argument("--source", default=os.path.dirname(HERE), help="the source tree (README.md, docs/)")
    ap.add_argument("--list", action="store_true", help="only list the commands found")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command, not only failures")
    a = ap.parse_args()
    binary, source = os.path.abspath(a.binary), os.path.abspath(a.source)
    if not os.access(binary, os.X_OK):
        print(f"doc_commands: {binary}: not an executable", file=sys.stderr)
        return 1
    docs = [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    found = []
    for path in docs:
        found += doc_commands(path, os.path.relpath(path, source))
    commands = [(where, words, skip) for where, _, cmds, skip in found for words in cmds]
    if a.list:
        for where, words, skip in commands:
            print(f"{where}: {prepare(words)[0]}" + (f"   [skip: {skip}]" if skip else ""))
        return 0
    if len(commands) < 20:
        print(f"doc_commands: only {len(commands)} attnbench commands found in README.md and docs/*.md: "
              "is the extraction broken?")
        return 1
    plugin_text = tutorial_plugin(source)
    passed, failed, skipped, no_gpu = 0, [], [], []
    for where, text, cmds, skip in found:
        if skip:
            skipped += [(where, " ".join(w.raw for w in words), skip) for words in cmds]
        elif run_line(where, cmds, binary, source, plugin_text, a.verbose, no_gpu):
            passed += len(cmds)
        else:
            failed.append(where)
    errors = two_commands(source) + inline_patterns(docs, source, binary, plugin_text) + usage_lines(docs, source, binary)
    errors += schema_numbers(docs, source)
    for e in errors:
        print(f"FAILED {e}")
    for where, cmd, reason in skipped:
        print(f"skipped {where}: {cmd}   ({reason})")
    for what in no_gpu:
        print(f"passed as needing a GPU (exit 3, one line: no usable GPU here): {what}")
    print(f"{len(commands)} documented attnbench commands: {passed} passed, {len(skipped)} skipped, "
          f"{len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "") +
          f"; README's two commands, usage lines and inline -k patterns: {len(errors)} failed")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
