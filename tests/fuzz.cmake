# The CLI's mutation fuzzer (tests/fuzz.cpp): hostile case files, --set strings, flags and
# compare inputs, each run in a forked child; any crash, hang, sanitizer report or
# malformed error message is a finding and fails the test. Needs no GPU (--dry-run).
# Longer runs: attnbench_fuzz --seed N --seconds 600 --corpus cases --keep DIR
# (and a -DATTNBENCH_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug build for ASan + UBSan).
add_executable(attnbench_fuzz fuzz.cpp)
target_link_libraries(attnbench_fuzz PRIVATE attnbench_core)
add_test(NAME fuzz_cli
         COMMAND attnbench_fuzz --seed 1 --seconds 45 --corpus ${CMAKE_SOURCE_DIR}/cases
                 --compare-dir ${CMAKE_CURRENT_SOURCE_DIR}/compare
                 --keep ${CMAKE_CURRENT_BINARY_DIR}/fuzz-findings)
set_tests_properties(fuzz_cli PROPERTIES LABELS "cpu;fuzz" TIMEOUT 120)

# What toml++ 3.3 mishandles, found by the fuzzer (app/toml_guard.hpp): each must be an
# ordinary parse error, exit 2, in every build; without the guard the Debug and sanitizer
# builds abort or report undefined behaviour, and the deep key crashes every build.
set(TOML_GUARD_DIR ${CMAKE_CURRENT_BINARY_DIR}/toml-guard)
string(REPEAT "a." 50000 TOML_GUARD_DEEP)
file(WRITE ${TOML_GUARD_DIR}/bracket-newline.toml "op = \"softmax\"\n[\nx]\n")
file(WRITE ${TOML_GUARD_DIR}/bracket-dot.toml "op = \"softmax\"\n[.]\n")
file(WRITE ${TOML_GUARD_DIR}/non-ascii-value.toml "op = \"softmax\"\nx = é\n")
file(WRITE ${TOML_GUARD_DIR}/multiline-backslash.toml "op = \"softmax\"\nx = \"\"\"a\\\n  é\"\"\"\n")
file(WRITE ${TOML_GUARD_DIR}/deep-key.toml "op = \"softmax\"\n${TOML_GUARD_DEEP}b = 1\n")
file(WRITE ${TOML_GUARD_DIR}/array-brace.toml "op = \"softmax\"\n[shape]\nrows = [64, 80,} 256]\n")
file(WRITE ${TOML_GUARD_DIR}/array-comma.toml "op = \"softmax\"\n[shape]\nrows = [ # none\n  , 1]\n")
cli_test(toml_guard_bracket_newline 2 "bracket-newline.toml:2:2: error: invalid TOML: expected a table name after '\\[', saw '\\\\n'"
         verify ${TOML_GUARD_DIR}/bracket-newline.toml --dry-run)
cli_test(toml_guard_bracket_dot 2 "bracket-dot.toml:2:2: error: invalid TOML: expected a table name"
         verify ${TOML_GUARD_DIR}/bracket-dot.toml --dry-run)
cli_test(toml_guard_non_ascii 2 "non-ascii-value.toml:2:5: error: invalid TOML: U\\+00E9 outside a string or comment"
         verify ${TOML_GUARD_DIR}/non-ascii-value.toml --dry-run)
cli_test(toml_guard_multiline 2 "multiline-backslash.toml:3:3: error: invalid TOML: U\\+00E9 first after a line-ending backslash"
         verify ${TOML_GUARD_DIR}/multiline-backslash.toml --dry-run)
cli_test(toml_guard_deep_key 2 "deep-key.toml:2:[0-9]+: error: invalid TOML: keys and values nested more than 100 levels deep"
         verify ${TOML_GUARD_DIR}/deep-key.toml --dry-run)
cli_test(toml_guard_array_brace 2 "array-brace.toml:3:16: error: invalid TOML: expected a value or '\\]' in an array, saw '}'"
         verify ${TOML_GUARD_DIR}/array-brace.toml --dry-run)
cli_test(toml_guard_array_comma 2 "array-comma.toml:4:3: error: invalid TOML: expected a value or '\\]' in an array, saw ','"
         verify ${TOML_GUARD_DIR}/array-comma.toml --dry-run)
cli_test(toml_guard_set 2 "--set shape.é=1: error: bad key .*U\\+00E9 outside a string or comment"
         verify ${CMAKE_SOURCE_DIR}/cases/smoke/softmax.toml --dry-run --set shape.é=1)

# In the sanitizer build these run with the fuzzer (ctest -L fuzz): that is where toml++ aborted.
set_tests_properties(cli_toml_guard_bracket_newline cli_toml_guard_bracket_dot cli_toml_guard_non_ascii cli_toml_guard_multiline cli_toml_guard_deep_key cli_toml_guard_array_brace cli_toml_guard_array_comma cli_toml_guard_set PROPERTIES LABELS "cpu;cli;fuzz")
