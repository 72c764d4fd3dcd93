#!/usr/bin/env bash
# short-output.sh MAX_LINES MAX_WIDTH COMMAND...
# Passes when COMMAND's output (stdout and stderr together) has at most MAX_LINES lines
# of at most MAX_WIDTH bytes and no control character: a report compare refuses gets
# one short line, and strings from a report are printed escaped and cut.
max_lines=$1 max_width=$2
shift 2
out=$("$@" 2>&1)
printf '%s\n' "$out" | cat -v
lines=$(printf '%s\n' "$out" | wc -l)
width=$(printf '%s\n' "$out" | LC_ALL=C awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }')
if [ "$lines" -gt "$max_lines" ]; then
  echo "short-output.sh: $lines lines of output, expected at most $max_lines" >&2
  exit 1
fi
if [ "$width" -gt "$max_width" ]; then
  echo "short-output.sh: a line of $width bytes, expected at most $max_width" >&2
  exit 1
fi
if printf '%s\n' "$out" | LC_ALL=C grep -q '[[:cntrl:]]'; then
  echo "short-output.sh: a control character in the output" >&2
  exit 1
fi
exit 0
