"""The librdkafka suite harness reads librdkafka's test table and its runner's output right
(bench/librdkafka_suite.py, issue #26): samples captured from librdkafka v2.15.0's
``tests/test-runner`` run against our broker."""

from __future__ import annotations

from bench.librdkafka_suite import (
    SuiteTest,
    explain_skip,
    parse_numbers,
    parse_runner_output,
    parse_test_table,
    plan,
)

E = "\x1b"

# tests/test.c (v2.15.0), an excerpt of the tests[] table
TEST_C = """
#define _TEST(NAME, FLAGS, ...)                                                \\
        { .name = #NAME, .mainfunc = main_##NAME, .flags = FLAGS, __VA_ARGS__ }

struct test tests[] = {
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0004_conf, TEST_F_LOCAL),
    _TEST(0011_produce_batch,
          0,
          /* Produces a lot of messages */
          _THRES(.ucpu = 40.0, .scpu = 8.0)),
    _TEST(0028_long_topicnames,
          TEST_F_KNOWN_ISSUE,
          TEST_BRKVER(0, 9, 0, 0),
          .extra = "https://github.com/edenhill/librdkafka/issues/529"),
    _TEST(0045_subscribe_update, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
    _TEST(0045_subscribe_update_mock, TEST_F_LOCAL),
    _TEST(0055_producer_latency,
          TEST_F_KNOWN_ISSUE_WIN32 | TEST_F_KNOWN_ISSUE_OSX),
    _TEST(0103_transactions,
          0,
          TEST_BRKVER(0, 11, 0, 0),
          .scenario = "default,ak23"),
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}};
"""

PASSED = f"""{E}[36m[0001_multiobj               /  0.000s] ================= Running test 0001_multiobj =================
{E}[0m{E}[36m[0001_multiobj               /  1.429s] {E}[32m================= Test 0001_multiobj PASSED ================={E}[0m
TEST 20261128182620 (bare, scenario default) SUMMARY
#==================================================================#
|{E}[32m <MAIN>                                   |     PASSED |   2.003s {E}[0m|
|{E}[32m 0001_multiobj                            |     PASSED |   1.429s {E}[0m|
#==================================================================#
"""

SKIPPED = f"""{E}[0m{E}[33m[0028_long_topicnames        /  0.000s] WARN: SKIPPING TEST: Filtered due to negative test flags
TEST 20261128182724 (bare, scenario default) SUMMARY
#==================================================================#
|{E}[32m <MAIN>                                   |     PASSED |   0.000s {E}[0m|
|{E}[36m 0028_long_topicnames                     |    SKIPPED |   0.000s {E}[0m|{E}[36m Filtered due to negative test flags{E}[0m
#==================================================================#
"""

SUBTEST = (
    "do_test_CreateTopics:78: 0081_admin#producer-4 CreateTopics with temp queue, op timeout 15000, "
    "op_timeout 15000, validate_only 0"
)
FAILED = f"""{E}[36m[0081_admin                  /  0.000s] ================= Running test 0081_admin =================
{E}[0m{E}[31m### Test "0081_admin ({SUBTEST})" failed at 0081-admin.c:236:do_test_CreateTopics() at Sat Nov 28 18:30:28 2026: ###
Expected NO_ERROR, not 40: INVALID_CONFIG
{E}[36m[0081_admin                  /  0.347s] CreateTopics result: #4: rdkafkatest_rnd22ff3e6612c812a_do_test_CreateTopics: NO_ERROR: (null)
{E}[0m{E}[31m### Test "0081_admin ({SUBTEST})" failed at test.c:6416:test_wait_metadata_update() at Sat Nov 28 18:30:45 2026: ###
Expected topics not seen in given time.
TEST 20261128183027 (bare, scenario default) SUMMARY
#==================================================================#
|{E}[32m <MAIN>                                   |     PASSED |  18.018s {E}[0m|
|{E}[31m 0081_admin                               |     FAILED |  18.006s {E}[0m|{E}[31m {SUBTEST}: do_test_CreateTopics():236: Expected NO_ERROR, not 40: INVALID_CONFIG{E}[0m
#==================================================================#
{E}[0m{E}[31m### Test "<MAIN>" failed at test.c:1946:test_wait_exit() at Sat Nov 28 18:30:46 2026: ###
3 thread(s) still active in librdkafka
test-runner: test.c:7702: test_fail0: Assertion `0' failed.
"""


def test_parse_test_table_flags_and_scenarios() -> None:
    tests = {t.name: t for t in parse_test_table(TEST_C)}
    assert list(tests) == [
        "0004_conf",
        "0011_produce_batch",
        "0028_long_topicnames",
        "0045_subscribe_update",
        "0045_subscribe_update_topic_remove",
        "0045_subscribe_update_mock",
        "0055_producer_latency",
        "0103_transactions",
        "8000_idle",
    ]
    assert tests["0004_conf"].local and not tests["0011_produce_batch"].local
    assert tests["8000_idle"].manual
    assert tests["0028_long_topicnames"].known_issue
    assert not tests["0055_producer_latency"].known_issue  # only on Windows / macOS
    assert tests["0045_subscribe_update_topic_remove"].scenarios == ("noautocreate",)
    assert tests["0103_transactions"].scenarios == ("default", "ak23")
    assert tests["0011_produce_batch"].scenarios == ("default",)


def test_plan_puts_each_test_on_its_cluster() -> None:
    phases, names = plan(parse_test_table(TEST_C), parse_numbers("0001-0150"))
    by_label = {p.label: p for p in phases}
    assert by_label["1 broker"].numbers == ("0011", "0028", "0045", "0055")
    assert by_label["3 brokers"].numbers == ("0103",)  # 0101 is not in this excerpt
    assert by_label["3 brokers, noautocreate"].numbers == ("0045",)
    assert not by_label["3 brokers, noautocreate"].auto_create
    assert names["1 broker/0045"] == ["0045_subscribe_update"]  # not the mock nor the noautocreate one
    assert names["3 brokers, noautocreate/0045"] == ["0045_subscribe_update_topic_remove"]
    assert parse_numbers("0011, 0081,0100-0102") == {"0011", "0081", "0100", "0101", "0102"}


def test_passed_and_skipped() -> None:
    [passed] = parse_runner_output(PASSED, ["0001_multiobj"], timed_out=False)
    assert (passed.result, passed.seconds, passed.reason) == ("passed", 1.429, "")
    [skipped] = parse_runner_output(SKIPPED, ["0028_long_topicnames"], timed_out=False)
    assert (skipped.result, skipped.reason) == ("skipped", "Filtered due to negative test flags")
    known = SuiteTest(
        "0028_long_topicnames", local=False, manual=False, scenarios=("default",), known_issue=True
    )
    assert "TEST_F_KNOWN_ISSUE" in explain_skip(known, skipped.reason)


def test_failed_gives_the_first_failure_with_its_place() -> None:
    [failed] = parse_runner_output(FAILED, ["0081_admin"], timed_out=False)
    assert failed.result == "failed"
    assert failed.seconds == 18.006
    assert failed.reason == f"0081-admin.c:236: Expected NO_ERROR, not 40: INVALID_CONFIG (subtest {SUBTEST})"


def test_killed_at_the_timeout_is_a_hang() -> None:
    started_only = PASSED.split("\n")[0] + "\n"  # "Running test", no end, no summary
    [hang] = parse_runner_output(started_only, ["0001_multiobj"], timed_out=True)
    assert hang.result == "hang"
    [hang] = parse_runner_output("", ["0001_multiobj"], timed_out=True)  # killed before any output
    assert hang.result == "hang"
    # a test the runner never reached, beside one that finished, in a process that exited early
    results = parse_runner_output(
        PASSED.split("TEST 2026")[0], ["0001_multiobj", "0001_other"], timed_out=False
    )
    assert [(r.name, r.result) for r in results] == [("0001_multiobj", "passed"), ("0001_other", "not run")]


# a C++ test (testcpp.h's Test::Fail: no function name in the report)
FAILED_CPP = f"""{E}[0m{E}[31m### Test "0113_cooperative_rebalance (l_unsubscribe:1715)" failed at testcpp.h:77:() at Sat Nov 28 18:40:55 2026: ###
Expecting consumer 1's assign_call_cnt to be 1 not: 2
TEST 20261128183945 (bare, scenario default) SUMMARY
#==================================================================#
|{E}[32m <MAIN>                                   |     PASSED |  70.033s {E}[0m|
|{E}[36m 0113_cooperative_rebalance_local         |    SKIPPED |   0.000s {E}[0m|{E}[36m Filtered due to negative test flags{E}[0m
|{E}[31m 0113_cooperative_rebalance               |     FAILED |  70.023s {E}[0m|{E}[31m l_unsubscribe:1715: ():77: Expecting consumer 1's assign_call_cnt to be 1 not: 2{E}[0m
#==================================================================#
"""


def test_failed_cpp_test() -> None:
    [failed] = parse_runner_output(FAILED_CPP, ["0113_cooperative_rebalance"], timed_out=False)
    assert (failed.result, failed.seconds) == ("failed", 70.023)
    assert failed.reason == (
        "testcpp.h:77: Expecting consumer 1's assign_call_cnt to be 1 not: 2 (subtest l_unsubscribe:1715)"
    )
