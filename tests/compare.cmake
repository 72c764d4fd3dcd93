# `attnbench compare` refuses what it cannot believe: each bad report below exits 2 with
# one line naming the file (and the row), never a crash, a table or "+inf%". Included
# from tests/CMakeLists.txt after the compare_* tests; uses cli_test and CMP from there.
set(SHORT ${CMP}/short-output.sh)

# compare_refuses(NAME REGEX ARGS...): exit 2 with REGEX, and at most 3 short clean lines.
function(compare_refuses name regex)
  cli_test(${name} 2 "${regex}" compare ${ARGN})
  add_test(NAME cli_${name}_short COMMAND ${SHORT} 3 400 $<TARGET_FILE:attnbench> compare ${ARGN})
  set_tests_properties(cli_${name}_short PROPERTIES LABELS "cpu;cli")
endfunction()

# compare_refuses_values(FLAG REGEX REPORT "id:value"...): compare REPORT with itself and
# --FLAG=value for each pair; every one must be refused with REGEX (test compare_FLAG_id).
function(compare_refuses_values flag regex report)
  foreach(pair ${ARGN})
    string(REPLACE ":" ";" pair "${pair}")
    list(GET pair 0 id)
    list(LENGTH pair n)
    set(bad "")
    if(n GREATER 1)
      list(GET pair 1 bad)
    endif()
    compare_refuses(compare_${flag}_${id} "${regex}" ${report} ${report} "--${flag}=${bad}")
  endforeach()
endfunction()

set(ROW "rows\\[1\\] \\(case \"softmax\", point \"cols=1000\", variant \"warp_online\", mode \"cold\"\\)")
set(NAIVE "rows\\[0\\] \\(case \"softmax\", point \"cols=1000\", variant \"naive\", mode \"cold\"\\)")

# 1. Schema: missing, not an integer, or not one this build reads (1 to 3).
compare_refuses(compare_bad_schema "bad-schema.json: error: the report has schema 99; this build of attnbench reads schema 1 to 4"
                ${CMP}/base.json ${CMP}/bad-schema.json)
compare_refuses(compare_schema_string "schema-string.json: error: the report's \"schema\" is the string \"2\", not an integer"
                ${CMP}/schema-string.json ${CMP}/base.json)
compare_refuses(compare_no_schema "no-schema.json: error: the report has no \"schema\"; this build"
                ${CMP}/no-schema.json ${CMP}/base.json)
# Schema 1 (base.json), schema 2 (slow.json) and schema 3 (samples-*.json) reports compare.
cli_test(compare_schema_1_and_2 1 "\\+25\\.0% +1\\.250 +SLOW" compare ${CMP}/base.json ${CMP}/slow.json)

# 2. Impossible statistics, named by file, row and mode.
compare_refuses(compare_negative_time "negative-time.json: error: ${ROW}: timing.median_ms is -0.4: a time cannot be negative"
                ${CMP}/base.json ${CMP}/negative-time.json)
compare_refuses(compare_quartiles "quartiles.json: error: ${ROW}: timing has its quartiles out of order: q1_ms 0.0041, median_ms 0.004, q3_ms 0.0039"
                ${CMP}/quartiles.json ${CMP}/base.json)
compare_refuses(compare_zero_median "zero-median.json: error: ${NAIVE}: timing.median_ms is 0: no kernel runs in no time"
                ${CMP}/zero-median.json ${CMP}/base.json)
compare_refuses(compare_negative_samples "negative-samples.json: error: ${NAIVE}: timing.samples is -120"
                ${CMP}/base.json ${CMP}/negative-samples.json)
compare_refuses(compare_infinite_time "huge-number.json: error: not valid json: number overflow parsing '1e999'"
                ${CMP}/huge-number.json ${CMP}/base.json)

# 3. Strings from a report are printed escaped and cut: no escape code reaches the terminal.
# The table prints the case as a heading line over its rows.
cli_test(compare_control_chars 0 "^ +cols=1000\\|rows=2\\\\nSLOW +naive\\\\x1b\\[2J.*\\.\\.\\. +cold\\\\x07"
         compare ${CMP}/control-chars.json ${CMP}/control-chars.json)
cli_test(compare_control_chars_case 0 "^\\\\x1b\\[31msoftmax\\\\x1b\\[0m$"
         compare ${CMP}/control-chars.json ${CMP}/control-chars.json)
cli_test(compare_control_chars_markdown 0 "\\| \\\\\\\\x1b\\[31msoftmax\\\\\\\\x1b\\[0m \\| cols=1000\\\\\\|rows=2\\\\\\\\nSLOW \\|"
         compare ${CMP}/control-chars.json ${CMP}/control-chars.json --format markdown)
# Two rows: the labels, the header, the case, the rows, their two shared notes as
# footnotes, the summary, and the two lines of the footnote on rows without samples.
add_test(NAME cli_compare_control_chars_short
         COMMAND ${SHORT} 11 600 $<TARGET_FILE:attnbench> compare ${CMP}/control-chars.json ${CMP}/control-chars.json)
add_test(NAME cli_compare_control_chars_markdown_short
         COMMAND ${SHORT} 14 600 $<TARGET_FILE:attnbench> compare ${CMP}/control-chars.json ${CMP}/control-chars.json
                 --format markdown)
set_tests_properties(cli_compare_control_chars_short cli_compare_control_chars_markdown_short PROPERTIES LABELS "cpu;cli")

# 4. Reading: a directory, an empty file, invalid json, a json that is no object, wrong types.
compare_refuses(compare_directory "compare: error: is a directory, not a json report$" ${CMP} ${CMP}/base.json)
compare_refuses(compare_empty_file "empty.json: error: the file is empty" ${CMP}/base.json ${CMP}/empty.json)
compare_refuses(compare_not_json "not-json.json: error: not valid json: parse error at line 3" ${CMP}/not-json.json ${CMP}/base.json)
compare_refuses(compare_not_an_object "array.json: error: not an attnbench json report: the document is an array"
                ${CMP}/array.json ${CMP}/base.json)
compare_refuses(compare_rows_object "rows-object.json: error: \"rows\" is an object, expected an array"
                ${CMP}/base.json ${CMP}/rows-object.json)
compare_refuses(compare_timing_array "timing-array.json: error: rows\\[0\\] \\(case \"softmax\", point \"cols=1000\", variant \"naive\"\\): timing is an array, expected an object"
                ${CMP}/timing-array.json ${CMP}/base.json)
compare_refuses(compare_string_number "string-number.json: error: ${NAIVE}: timing.median_ms is the string \"0.01\", expected a number"
                ${CMP}/string-number.json ${CMP}/base.json)
compare_refuses(compare_missing_file_short "nope.json: error: cannot read the report: No such file" ${CMP}/nope.json ${CMP}/base.json)
compare_refuses(compare_not_a_report_short "not-a-report.json: error: not an attnbench json report" ${CMP}/not-a-report.json ${CMP}/base.json)

# 5. --threshold: a plain percentage from 0 to 1000.
compare_refuses_values(threshold "--threshold .*: error: expected a percentage from 0 to 1000" ${CMP}/base.json
                       "nan:nan" "inf:inf" "negative:-5" "over_1000:1001" "junk:5x" "exponent:1e1" "space: 5"
                       "two_percent:5%%")
cli_test(compare_threshold_1000 0 "threshold 1000%" compare ${CMP}/base.json ${CMP}/base.json --threshold 1000)

# 6. Verdicts from the samples (tests/compare/make-samples.py wrote the fixtures): the
# bootstrap interval of NEW / BASE medians against the band [1/1.05, 1.05].
set(SB ${CMP}/samples-base.json)
cli_test(compare_samples_same 1 "cols=1000 +warp_online +cold .* \\+0\\.1% +1\\.001 \\(0\\.9[0-9]+-1\\.0[0-4][0-9]\\) +SAME$"
         compare ${SB} ${CMP}/samples-new.json)
cli_test(compare_samples_slow 1 "cols=4096 +warp_online +cold .* \\+25\\.0% +1\\.250 \\(1\\.[1-2][0-9]+-1\\.[2-3][0-9]+\\) +SLOW$"
         compare ${SB} ${CMP}/samples-new.json)
cli_test(compare_samples_fast 1 "cols=16384 +warp_online +cold .* -20\\.0% +0\\.800 \\(0\\.[7-8][0-9]+-0\\.[8-9][0-4][0-9]\\) +FAST$"
         compare ${SB} ${CMP}/samples-new.json)
# The noisy regression (median 1.0, quartiles 0.7-1.3, against 1.25, 0.95-1.6) that the
# quartile rule called SAME: its interval crosses the band's edges.
cli_test(compare_samples_unsure 1 "cols=65536 +warp_online +cold .* \\+25\\.0% +1\\.250 \\(0\\.9[0-9]+-1\\.[0-9]+\\) +UNSURE$"
         compare ${SB} ${CMP}/samples-new.json)
# Its note would pass 120 columns beside it: on its own line under the row.
cli_test(compare_samples_unsure_note 1 "^      the interval crosses 0\\.952 and 1\\.050; BASE's noise is above the threshold$"
         compare ${SB} ${CMP}/samples-new.json)
cli_test(compare_samples_summary 1 "^1 FAST, 1 SLOW, 1 SAME, 1 UNSURE \\(threshold 5%: SLOW above 1\\.050x, FAST below 0\\.952x, by 95% bootstrap"
         compare ${SB} ${CMP}/samples-new.json)
cli_test(compare_samples_markdown 1 "\\| cols=65536 \\| .* \\| 1\\.250 \\(0\\.9[0-9]+-1\\.[0-9]+\\) \\| \\*\\*UNSURE\\*\\* \\|"
         compare ${SB} ${CMP}/samples-new.json --format markdown)
# UNSURE alone passes, unless the gate asks for every change decided.
cli_test(compare_unsure_passes 0 "^0 FAST, 0 SLOW, 3 SAME, 1 UNSURE" compare ${SB} ${CMP}/noisy-new.json)
cli_test(compare_fail_on_unsure 1 "^0 FAST, 0 SLOW, 3 SAME, 1 UNSURE" compare ${SB} ${CMP}/noisy-new.json --fail-on-unsure)
# A higher confidence widens every interval: at 99.9% the tight regression is still SLOW.
cli_test(compare_confidence_header 1 "NEW/BASE \\(99\\.9% CI\\)" compare ${SB} ${CMP}/samples-new.json --confidence 99.9%)
cli_test(compare_confidence_slow 1 "cols=4096 .* +SLOW$" compare ${SB} ${CMP}/samples-new.json --confidence 0.999)
# The same inputs, the same verdicts and intervals, run after run.
add_test(NAME cli_compare_deterministic
         COMMAND sh -c "a=$(\"$0\" compare \"$1\" \"$2\"); b=$(\"$0\" compare \"$1\" \"$2\"); printf '%s\\n' \"$a\"; [ \"$a\" = \"$b\" ] && [ -n \"$a\" ]"
                 $<TARGET_FILE:attnbench> ${SB} ${CMP}/samples-new.json)
set_tests_properties(cli_compare_deterministic PROPERTIES LABELS "cpu;cli")
# Reports without samples (base.json and slow.json: schema 1 and 2) are judged by the
# quartiles, and the output says so under the table.
cli_test(compare_without_samples 1 "^\\* 2 rows judged without samples \\(a report without samples_ms, or fewer than 5\\)"
         compare ${CMP}/base.json ${CMP}/slow.json)
cli_test(compare_without_samples_markdown 1 "^\\\\\\* 2 rows judged without samples"
         compare ${CMP}/base.json ${CMP}/slow.json --format markdown)

# 7. --confidence: a fraction from 0.5 to 0.999, or 50% to 99.9%.
compare_refuses_values(confidence
                       "--confidence .*: error: expected a fraction from 0\\.5 to 0\\.999 or a percentage from 50% to 99\\.9%"
                       ${SB} "zero:0" "one:1" "over_one:1.5" "percent_without_sign:95" "below_half:0.4" "word:high"
                       "nan:nan" "negative:-0.9" "hundred_percent:100%" "exponent:9.5e-1")

# 8. The gate (issue 46): rows missing in NEW fail unless --allow-missing; --pair names
# must exist; --golden DIR picks BASE by NEW's card; -o writes its extension's format.
cli_test(compare_missing_fails 1
         "^1 row of BASE is missing in NEW: softmax-fp32 cols=65536 warp_online \\(cold\\); this fails the comparison"
         compare ${SB} ${CMP}/missing-new.json)
cli_test(compare_allow_missing 0 "1 row of BASE is missing in NEW: .*; allowed by --allow-missing"
         compare ${SB} ${CMP}/missing-new.json --allow-missing --threshold 30)
compare_refuses(compare_pair_unknown_base
                "compare: error: --pair torch_sdpa_cudnn=naive: BASE \\(.*base\\.json\\) has no variant \"torch_sdpa_cudnn\"; its variants: naive, warp_online$"
                ${CMP}/base.json ${CMP}/slow.json --pair torch_sdpa_cudnn=naive)
compare_refuses(compare_pair_unknown_new
                "--pair naive=warp_onlin: NEW \\(.*slow\\.json\\) has no variant \"warp_onlin\" \\(did you mean warp_online\\?\\); its variants: naive, warp_online$"
                ${CMP}/base.json ${CMP}/slow.json --pair naive=warp_onlin)
# tests/compare/goldens holds nvidia-h200.json and nvidia-h100-80gb-hbm3.json (every row
# twice as slow: the H200 run would be FAST against it). At a golden's default 10%:
set(GOLDENS ${CMP}/goldens)
cli_test(compare_golden_picks_the_card 1 "^BASE: golden .*goldens/nvidia-h200\\.json: NVIDIA H200"
         compare --golden ${GOLDENS} ${CMP}/golden-slow.json)
cli_test(compare_golden_15_percent_slower_fails 1
         "^0 FAST, 3 SLOW, 0 SAME, 1 UNSURE \\(threshold 10%: SLOW above 1\\.100x"
         compare --golden ${GOLDENS} ${CMP}/golden-slow.json)
cli_test(compare_golden_within_noise_passes 0 "^0 FAST, 0 SLOW, 3 SAME, 1 UNSURE \\(threshold 10%"
         compare --golden ${GOLDENS} ${CMP}/golden-noise.json)
# The golden's noisy row (quartiles 0.7-1.3) is noisier than the threshold: warned.
cli_test(compare_golden_noise_warning 0
         "attnbench: warning: 1 row of BASE has noise above the 10% threshold \\(up to 44%, e\\.g\\. softmax-fp32 cols=65536 warp_online \\(cold\\)\\)"
         compare --golden ${GOLDENS} ${CMP}/golden-noise.json)
# A --threshold given wins over a golden's 10%: at 20% the 15% is SAME.
cli_test(compare_golden_threshold_given 0 "^0 FAST, 0 SLOW, 3 SAME, 1 UNSURE \\(threshold 20%"
         compare --golden ${GOLDENS} ${CMP}/golden-slow.json --threshold 20)
compare_refuses(compare_golden_no_file
                "compare: error: --golden .*goldens: no golden file nvidia-a100-sxm4-80gb\\.json for .*golden-a100\\.json's card \"NVIDIA A100-SXM4-80GB\"; the directory holds nvidia-h100-80gb-hbm3\\.json, nvidia-h200\\.json$"
                --golden ${GOLDENS} ${CMP}/golden-a100.json)
compare_refuses(compare_golden_two_reports "with --golden DIR give only NEW\\.json"
                --golden ${GOLDENS} ${SB} ${CMP}/golden-slow.json)
compare_refuses(compare_one_report "compare: error: expected BASE\\.json NEW\\.json" ${SB})
# Formats: csv and json on stdout; -o by its extension, whatever stdout shows.
cli_test(compare_csv 1 "^softmax-fp32,cols=4096,warp_online,,cold,SLOW,1,0\\.25" compare ${SB} ${CMP}/samples-new.json --format csv)
cli_test(compare_json 1 "^ \"exit_code\": 1,$" compare ${SB} ${CMP}/samples-new.json --format json)
set(CMP_OUT ${CMAKE_CURRENT_BINARY_DIR}/compare-out)
file(MAKE_DIRECTORY ${CMP_OUT})
add_test(NAME cli_compare_output_json
         COMMAND sh -c "\"$0\" compare \"$1\" \"$2\" -o \"$3\" >/dev/null 2>&1; rc=$?; [ $rc = 1 ] || exit 9; python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j[\"compare\"] == 1 and j[\"exit_code\"] == 1 and j[\"counts\"][\"SLOW\"] == 1 and len(j[\"rows\"]) == 4, j; print(\"ok\")' \"$3\""
                 $<TARGET_FILE:attnbench> ${SB} ${CMP}/samples-new.json ${CMP_OUT}/v.json)
add_test(NAME cli_compare_output_csv
         COMMAND sh -c "\"$0\" compare \"$1\" \"$2\" -o \"$3\" --format markdown >/dev/null 2>&1; head -1 \"$3\" | grep -q '^case,point,variant,'"
                 $<TARGET_FILE:attnbench> ${SB} ${CMP}/samples-new.json ${CMP_OUT}/v.csv)
add_test(NAME cli_compare_output_md
         COMMAND sh -c "\"$0\" compare \"$1\" \"$2\" -o \"$3\" >/dev/null 2>&1; grep -q '^| case | point |' \"$3\""
                 $<TARGET_FILE:attnbench> ${SB} ${CMP}/samples-new.json ${CMP_OUT}/v.md)
set_tests_properties(cli_compare_output_json cli_compare_output_csv cli_compare_output_md PROPERTIES LABELS "cpu;cli")
# The json output against its schema (docs/compare.schema.json), when the schema is there.
if(EXISTS ${CMAKE_SOURCE_DIR}/docs/compare.schema.json)
  add_test(NAME cli_compare_json_schema
           COMMAND sh -c "python3 -c 'import jsonschema' 2>/dev/null || { echo 'skipped: no python3-jsonschema'; exit 77; }; for a in \"$2 $3\" \"$2 $4\" \"--golden $5 $6\"; do \"$0\" compare $a --format json > \"$7\"; python3 -c 'import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))' \"$1\" \"$7\" || exit 1; done"
                   $<TARGET_FILE:attnbench> ${CMAKE_SOURCE_DIR}/docs/compare.schema.json ${SB} ${CMP}/samples-new.json
                   ${CMP}/missing-new.json ${GOLDENS} ${CMP}/golden-noise.json ${CMP_OUT}/schema.json)
  set_tests_properties(cli_compare_json_schema PROPERTIES LABELS "cpu;cli;schema" SKIP_RETURN_CODE 77)
endif()
# 120 columns: the default table of the fixtures, warnings and notes included.
foreach(pair "samples:${SB}:${CMP}/samples-new.json" "missing:${SB}:${CMP}/missing-new.json"
             "quartiles:${CMP}/base.json:${CMP}/slow.json")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 id)
  list(GET pair 1 a)
  list(GET pair 2 b)
  # stdout only: a warning on stderr is one line, as every message there.
  add_test(NAME cli_compare_fits_120_${id}
           COMMAND ${SHORT} 20 120 sh -c "\"$0\" compare \"$1\" \"$2\" 2>/dev/null" $<TARGET_FILE:attnbench> ${a} ${b})
  set_tests_properties(cli_compare_fits_120_${id} PROPERTIES LABELS "cpu;cli")
endforeach()
