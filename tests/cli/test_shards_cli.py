"""``oloproof run --shard I/K`` and ``oloproof merge`` as a user types them: K jobs, each
with a store of its own, then one job that merges them (issue 27 §1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import run_cli
from tests.store.test_shards import _project


def test_four_shards_in_four_stores_merge_into_the_single_run(tmp_path: Path) -> None:
    template = _project(tmp_path / "template")
    single_root = tmp_path / "single"
    shutil.copytree(template, single_root)
    single = run_cli("run", "--json", cwd=single_root)
    single_end = json.loads(single.out.splitlines()[-1])
    roots = []
    for index in range(1, 5):
        root = tmp_path / f"job-{index}"
        shutil.copytree(template, root)
        done = run_cli("run", "--shard", f"{index}/4", cwd=root)
        assert done.code == 5, done.text  # a shard never allows, never fails here
        assert f"Shard {index}/4: " in done.out and "oloproof merge" in done.out
        assert "DECIDED/SUBSET" in done.out
        roots.append(root)
    merge_root = tmp_path / "merge"
    shutil.copytree(template, merge_root)
    merged = run_cli("merge", *map(str, roots), "--json", cwd=merge_root)
    assert merged.code == single.code == single_end["exit_code"], merged.text
    doc = json.loads(merged.out)
    assert (doc["status"], doc["completeness"]) == ("DECIDED", "COMPLETE")
    assert [d["state"] for d in doc["decisions"]] == [d["state"] for d in single_end["decisions"]]
    assert [m["shard"] for m in doc["merged_from"]] == ["1/4", "2/4", "3/4", "4/4"]
    assert doc["copied"] == 4 and doc["already_merged"] is False
    gate = run_cli("gate", doc["run_id"], "--json", cwd=merge_root)
    assert gate.code == merged.code
    again = run_cli("merge", *map(str, roots), cwd=merge_root)
    assert again.code == merged.code
    assert "Already merged from 4 shards" in again.out and doc["run_id"] in again.out
    runs = run_cli("runs", "--json", cwd=merge_root)
    states = [r["completeness"] for r in json.loads(runs.out)]
    assert sorted(states) == ["COMPLETE", "SUBSET", "SUBSET", "SUBSET", "SUBSET"]
    # The merge's store has every shard's cache: the whole suite reruns calling nothing.
    rerun = run_cli("run", "--json", cwd=merge_root)
    end = json.loads(rerun.out.splitlines()[-1])
    assert end["exit_code"] == merged.code
    executed = [json.loads(line) for line in rerun.out.splitlines()]
    fresh = [e for e in executed if e["type"] == "case_executed" and not e["from_cache"]]
    # Failures are never cached: only the cases whose system call failed are called again.
    assert fresh and all(e["status"] == "ERROR" for e in fresh)


def test_bad_shard_and_merge_lines_exit_2_with_one_message(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", n=6)
    bad = run_cli("run", "--shard", "3/2", cwd=root)
    assert bad.code == 2 and bad.out == ""
    assert bad.err.strip() == (
        "oloproof run: error: --shard '3/2': I must be from 1 to 2 (accepted: I/K with whole"
        " numbers 1 <= I <= K <= 10,000, e.g. --shard 1/4 ... --shard 4/4 (shards are"
        " numbered from 1))"
    )
    nothing = run_cli("merge", cwd=root)
    assert nothing.code == 2 and "no store at" in nothing.err  # nothing run here yet
    run_cli("run", "--shard", "1/2", cwd=root)
    missing = run_cli("merge", cwd=root)
    assert missing.code == 2
    assert missing.err.splitlines() == [
        "oloproof merge: error: the shards cannot be merged into one run:",
        (f"  missing slices: 2/2 of 6 cases cut into 2 (no finished run of it in"
        f" {root / '.oloproof' / 'store.sqlite'}: run `oloproof run --shard 2/2`)"),
    ]
    assert "Traceback" not in missing.err
    # A file that is not a store (app.py named by mistake) is bad input, not a damaged
    # store: exit 2, one line.
    wrong = run_cli("merge", "app.py", cwd=root)
    assert wrong.code == 2, wrong.text
    assert wrong.err.strip() == (
        "oloproof merge: error: app.py: not a store (an SQLite file begins with 'SQLite"
        " format 3'; accepted: a project directory, a store file such as"
        " .oloproof/store.sqlite, or a postgresql:// URL)"
    )


def test_merges_that_start_together_make_one_merged_run(tmp_path: Path) -> None:
    """Three `oloproof merge` of the same shards at once (a retried CI job, two people):
    the look for an earlier merge and the new run are one step under the store's merge
    lock, so one merged run is made and the others say "Already merged" (three were made)."""
    import subprocess

    from tests.conftest import OLOPROOF

    root = _project(tmp_path / "p")
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    procs = [subprocess.Popen([*OLOPROOF, "merge", "--json"], cwd=root, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
             for _ in range(3)]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, err
        docs.append(json.loads(out))
    assert len({d["run_id"] for d in docs}) == 1, docs
    assert sorted(d["already_merged"] for d in docs) == [False, True, True]
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    assert sorted(r["completeness"] for r in runs) == ["COMPLETE", "SUBSET", "SUBSET"]


def _failing_on(root: Path, ids: list[str]) -> None:
    """The project's system raises on the cases ``ids`` (listed in a file it reads)."""
    (root / "failing.json").write_text(json.dumps(ids))
    app = root / "app.py"
    app.write_text(app.read_text().replace(
        "    n = case_input[\"n\"]\n",
        "    n = case_input[\"n\"]\n"
        "    import json, pathlib\n"
        "    if f\"case-{n:03d}\" in json.loads((pathlib.Path(__file__).parent / 'failing.json')"
        ".read_text()):\n"
        "        raise RuntimeError(f'no answer for {n}')\n", 1))


def test_a_shard_whose_slice_holds_only_failing_cases_is_merged(tmp_path: Path) -> None:
    """The run rule "the system failed on every call: no evidence, stopped" (SPEC §5) was
    applied to each shard: a slice holding only the cases the system fails on (2 of 12 here)
    was stopped RUN_ERROR/PARTIAL every time it ran, and `merge` refused to go on without it,
    while the whole suite in one run is decided. The shard is now decided (a shard never
    allows) and the merged run is the single run's; the rule applies to the shards together."""
    from oloproof.api._subset import shard_of

    root = _project(tmp_path / "p", n=12)
    ids = [json.loads(line)["id"] for line in (root / "data" / "cases.jsonl").read_text().splitlines()]
    slice_3 = [i for i in ids if shard_of(i, 3) == 3]
    assert 0 < len(slice_3) < len(ids)
    _failing_on(root, slice_3)
    single_root = tmp_path / "single"
    shutil.copytree(root, single_root)
    single = run_cli("run", "--json", cwd=single_root)
    single_end = json.loads(single.out.splitlines()[-1])
    assert single_end["status"] == "DECIDED", single.text
    for index in (1, 2, 3):
        done = run_cli("run", "--shard", f"{index}/3", cwd=root)
        assert done.code == 5 and "DECIDED/SUBSET" in done.out, done.text
    merged = run_cli("merge", "--json", cwd=root)
    doc = json.loads(merged.out)
    assert (doc["status"], doc["completeness"]) == ("DECIDED", "COMPLETE"), merged.text
    assert merged.code == single.code
    assert [d["state"] for d in doc["decisions"]] == [d["state"] for d in single_end["decisions"]]


def test_shards_whose_system_failed_on_every_case_merge_into_a_stopped_run(
    tmp_path: Path,
) -> None:
    """A shard whose every call failed is no longer stopped on its own (the test above), so
    the rule is `merge`'s: shards that hold no output between them make a RUN_ERROR/PARTIAL
    run, exit 5, naming why, as one run of the whole suite is; never a decision."""
    root = _project(tmp_path / "p", n=12)
    ids = [json.loads(line)["id"] for line in (root / "data" / "cases.jsonl").read_text().splitlines()]
    _failing_on(root, ids)
    whole = run_cli("run", cwd=tmp_path / "p")
    assert whole.code == 5 and "failed on every call" in whole.text, whole.text
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    merged = run_cli("merge", "--json", cwd=root)
    assert merged.code == 5, merged.text
    doc = json.loads(merged.out)
    assert (doc["status"], doc["completeness"]) == ("RUN_ERROR", "PARTIAL")
    assert doc["decisions"] == []
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    stopped = [r for r in runs if r["completeness"] == "PARTIAL"]
    assert any("the system failed on every case of the merged shards (12)" in
               (r.get("stop_reason") or "") for r in stopped), runs


def test_merging_the_same_failed_shards_again_makes_no_new_run(tmp_path: Path) -> None:
    """Shards with no output between them made a new RUN_ERROR/PARTIAL merged run at each
    `merge` (three merges: three identical stopped runs in `runs`). What stopped it is in
    the shards' rows, so merging them again stores it again: the run made before is
    returned, "Already merged", exit 5, as a decided merge is."""
    root = _project(tmp_path / "p", n=12)
    ids = [json.loads(line)["id"] for line in (root / "data" / "cases.jsonl").read_text().splitlines()]
    _failing_on(root, ids)
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    first = run_cli("merge", "--json", cwd=root)
    assert first.code == 5, first.text
    doc = json.loads(first.out)
    assert doc["status"] == "RUN_ERROR" and doc["already_merged"] is False
    for _ in range(2):
        again = run_cli("merge", "--json", cwd=root)
        assert again.code == 5, again.text
        redo = json.loads(again.out)
        assert (redo["run_id"], redo["status"]) == (doc["run_id"], "RUN_ERROR")
        assert redo["already_merged"] is True
    text = run_cli("merge", cwd=root)
    assert text.code == 5 and "Already merged from 2 shards" in text.out
    assert "the system failed on every case of the merged shards (12)" in text.out
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    assert sorted(r["completeness"] for r in runs) == ["PARTIAL", "SUBSET", "SUBSET"], runs


ALL_RIGHT = """
from oloproof import system

@system(name="right", version="1")
def answer(case_input):
    return {"label": "ok"}
"""


def test_a_shard_s_plan_sizes_the_rule_in_cases_of_the_merged_run(tmp_path: Path) -> None:
    """`plan` of a shard sized the rule from the shard's cases as if more could be added to
    it: shard 1/3 of 9 (2 cases, both right, `min: 0.8`) said "about 15 more cases would
    decide it (17 in total)", while the rule is decided at merge, on the suite's 9. It now
    says so, and sizes it in cases of the merged run: 8 more cases of the suite (17 in
    total); of a suite of 30, none: the merged run decides it. Both are what the merge
    then does; the 17 is the least n whose 95% Clopper-Pearson lower bound at n of n
    clears 0.8 (scipy)."""
    from scipy.stats import beta
    from tests.conftest import write_project

    need = next(n for n in range(1, 100) if beta.ppf(0.025, n, 1) >= 0.8)
    release = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.8\n"
    for suite in (9, 30):
        root = write_project(
            tmp_path / f"p{suite}", app=ALL_RIGHT, release=release,
            cases=[{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
                   for i in range(suite)],
        )
        for index in (1, 2, 3):
            assert run_cli("run", "--shard", f"{index}/3", cwd=root).code == 5
        runs = json.loads(run_cli("runs", "--json", cwd=root).out)
        shard_run = next(r["id"] for r in runs if 0 < r["cases"] < need)
        planned = run_cli("plan", shard_run, "--run", "--json", cwd=root)
        assert planned.code == 0, planned.text
        (rule,) = json.loads(planned.out)["rules"]
        assert rule["plan"] == "sized" and rule["total"] == need
        assert rule["scope"]["shard"].endswith("/3") and rule["scope"]["suite_cases"] == suite
        assert rule["more"] == max(0, need - suite)
        text = run_cli("plan", shard_run, "--run", cwd=root).out
        assert f"floor: decided at merge, on the {suite} cases of the suite" in text, text
        merged = json.loads(run_cli("merge", "--json", cwd=root).out)
        (decision,) = merged["decisions"]
        if rule["more"]:
            assert f"about {need - suite} more cases of the suite would ({need} in total)" in text
            assert decision["state"] == "INSUFFICIENT_EVIDENCE"
        else:
            assert "so the merged run of the suite would" in text
            assert decision["state"] == "PASS"


def test_shards_decided_under_a_policy_the_project_no_longer_holds_are_not_merged(
    tmp_path: Path,
) -> None:
    """Two shards run under `min: 0.5`, then release.yaml made `min: 0.99`: `merge` decided
    the new run under the shards' stored policy, `Gate ALLOW exit code 0` on 9 of 10 right,
    and `gate latest` said nothing either (the file is older than the merged run), where
    `run` of the same suite exits 1. Refused, exit 2, nothing merged; with the file as it
    was, the merge goes on."""
    from tests.conftest import write_project

    app = ALL_RIGHT.replace('return {"label": "ok"}',
                            'return {"label": "ok" if case_input["n"] % 10 else "ko"}')
    lax = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
    root = write_project(tmp_path / "p", app=app, release=lax,
                         cases=[{"id": f"q{i:03d}", "input": {"n": i},
                                 "expected": {"label": "ok"}} for i in range(60)])
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    (root / "release.yaml").write_text(lax.replace("0.5", "0.99"))
    merged = run_cli("merge", cwd=root)
    assert merged.code == 2, merged.text
    assert merged.err.splitlines() == [
        "oloproof merge: error: the shards cannot be merged into one run:",
        ("  a different policy: the shards were decided under release.yaml as it was when they"
         " ran, and release.yaml now says otherwise, so the merged run would be decided under"
         " a policy this project no longer holds; run the shards again under it (`oloproof"
         " run --shard I/K`), or put release.yaml back as it was"),
    ]
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    assert sorted(r["completeness"] for r in runs) == ["SUBSET", "SUBSET"]
    assert run_cli("run", cwd=root).code == 1  # the suite under the file as it is: FAIL
    (root / "release.yaml").write_text(lax)
    again = run_cli("merge", "--json", cwd=root)
    assert again.code == 0, again.text
    assert json.loads(again.out)["completeness"] == "COMPLETE"


def test_shards_of_a_suite_the_project_has_since_edited_are_not_merged(tmp_path: Path) -> None:
    """Two shards of 60 cases (54 right, floor min 0.5), then every expected label of
    data/cases.jsonl changed to one the system never gives (`run` of the file now: FAIL,
    exit 1). `merge` made a COMPLETE run of the old cases, `Gate ALLOW exit code 0`, and
    `gate latest` on it said nothing (the file is older than the merged run). Refused,
    exit 2, nothing merged; with the same cases written back (new bytes, same cases), the
    merge goes on."""
    from tests.conftest import write_project

    app = ALL_RIGHT.replace('return {"label": "ok"}',
                            'return {"label": "ok" if case_input["n"] % 10 else "ko"}')
    lax = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
    cases = [{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
             for i in range(60)]
    root = write_project(tmp_path / "p", app=app, release=lax, cases=cases)
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    suite = root / "data" / "cases.jsonl"
    kept = suite.read_text()
    suite.write_text("".join(json.dumps({**c, "expected": {"label": "yes"}}) + "\n"
                             for c in cases))
    merged = run_cli("merge", cwd=root)
    assert merged.code == 2, merged.text
    lines = merged.err.splitlines()
    assert lines[0] == "oloproof merge: error: the shards cannot be merged into one run:"
    assert lines[1].startswith(
        "  a different suite: the shards ran data/cases.jsonl as it was when they ran"
        " (sha256:"), lines
    assert ("and data/cases.jsonl now holds other cases (sha256:" in lines[1]
            and lines[1].endswith(
                "so the merged run would be a run of cases this project no longer holds; run"
                " the shards again (`oloproof run --shard I/K`: the cases they ran come from"
                " the cache), or put data/cases.jsonl back as it was")), lines
    assert len(lines) == 2 and "Traceback" not in merged.err
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    assert sorted(r["completeness"] for r in runs) == ["SUBSET", "SUBSET"]
    # From another directory, the project's suite is the one compared.
    elsewhere = run_cli("merge", "--config", "p/oloproof.yaml", cwd=tmp_path)
    assert elsewhere.code == 2 and "and p/data/cases.jsonl now holds other" in elsewhere.err
    assert run_cli("run", cwd=root).code == 1  # the suite as it is now: FAIL
    suite.write_text(kept.replace("\n", "\n\n"))  # the same cases, blank lines between
    again = run_cli("merge", "--json", cwd=root)
    assert again.code == 0, again.text
    assert json.loads(again.out)["completeness"] == "COMPLETE"


def test_shards_of_a_suite_oloproof_yaml_no_longer_names_are_not_merged(
    tmp_path: Path,
) -> None:
    """`dataset:` pointed at another file after the shards ran (v2.jsonl, whose cases the
    system fails): `merge` made a COMPLETE run of the old file's cases, exit 0. Refused,
    naming oloproof.yaml and the file; a copy of the same cases under another name merges."""
    from tests.conftest import write_project

    lax = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
    cases = [{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
             for i in range(60)]
    root = write_project(tmp_path / "p", app=ALL_RIGHT, release=lax, cases=cases)
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    config = root / "oloproof.yaml"
    text = config.read_text()
    (root / "data" / "v2.jsonl").write_text("".join(
        json.dumps({**c, "expected": {"label": "yes"}}) + "\n" for c in cases))
    config.write_text(text.replace("data/cases.jsonl", "data/v2.jsonl"))
    merged = run_cli("merge", cwd=root)
    assert merged.code == 2, merged.text
    assert merged.err.splitlines()[1].startswith(
        "  a different suite: the shards ran data/cases.jsonl as it was when they ran"
        " (sha256:"), merged.err
    assert ("and oloproof.yaml now names data/v2.jsonl as the suite, which holds other cases"
            " (sha256:") in merged.err
    assert merged.err.rstrip().endswith("or put oloproof.yaml back as it was"), merged.err
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    assert sorted(r["completeness"] for r in runs) == ["SUBSET", "SUBSET"]
    (root / "data" / "copy.jsonl").write_text((root / "data" / "cases.jsonl").read_text())
    config.write_text(text.replace("data/cases.jsonl", "data/copy.jsonl"))
    again = run_cli("merge", "--json", cwd=root)
    assert again.code == 0, again.text
    assert json.loads(again.out)["completeness"] == "COMPLETE"


def test_shards_measured_against_labels_since_corrected_are_not_merged(tmp_path: Path) -> None:
    """The judge example in two shards; a person then corrects a label (q02: the judge's
    pass was wrong). `merge` measured the judges against the labels stored with the shards
    and `gate latest` did not say the file had changed (it is older than the merged run).
    Refused, exit 2, nothing merged; with the file as it was, the merge goes on."""
    from tests.fakes.provider import FakeServer

    env = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}
    root = tmp_path / "j"
    assert run_cli("init", str(root), "--example", "judge", cwd=tmp_path).code == 0
    with FakeServer() as srv:
        config = root / "oloproof.yaml"
        config.write_text(config.read_text().replace("http://127.0.0.1:8787",
                                                     srv.anthropic_base_url))
        for index in (1, 2):
            assert run_cli("run", "--shard", f"{index}/2", cwd=root, env=env).code == 5
    labels = root / "data" / "labels.jsonl"
    kept = labels.read_bytes()
    rows = [json.loads(line) for line in kept.decode().splitlines()]
    rows[1]["pass"] = not rows[1]["pass"]
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    merged = run_cli("merge", cwd=root)
    assert merged.code == 2, merged.text
    assert merged.err.splitlines()[1].startswith(
        "  different human labels: the shards' judges were measured against data/labels.jsonl"
        " as it was when they ran, and data/labels.jsonl now holds other labels")
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    assert sorted(r["completeness"] for r in runs) == ["SUBSET", "SUBSET"]
    labels.write_bytes(kept)
    again = run_cli("merge", "--json", cwd=root)
    assert json.loads(again.out)["completeness"] == "COMPLETE", again.text


def test_a_shard_s_plan_over_trials_prices_the_cases_beyond_the_suite(tmp_path: Path) -> None:
    """Over 3 trials a case costs 3 calls: the calls are those of the cases beyond the
    suite (48 more cases, 144 calls, for shard 3/3 of 30), and more trials per case, sized
    over the shard's own cases, are not offered for a shard."""
    from tests.conftest import write_project

    app = ALL_RIGHT.replace('return {"label": "ok"}',
                            'return {"label": "ok" if case_input["n"] % 7 else "ko"}')
    release = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.6\n"
    root = write_project(tmp_path / "p", app=app, release=release,
                         cases=[{"id": f"q{i:03d}", "input": {"n": i},
                                 "expected": {"label": "ok"}} for i in range(30)])
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "trials: 3\n")
    for index in (1, 2, 3):
        assert run_cli("run", "--shard", f"{index}/3", cwd=root).code == 5
    for run in json.loads(run_cli("runs", "--json", cwd=root).out):
        doc = json.loads(run_cli("plan", run["id"], "--run", "--json", cwd=root).out)
        (rule,) = doc["rules"]
        if rule["plan"] != "sized":
            continue
        assert rule["more"] == max(0, rule["total"] - 30)
        assert rule["calls"] == 3 * rule["more"]
        text = run_cli("plan", run["id"], "--run", cwd=root).out
        assert "decided at merge, on the 30 cases" in text and "  trials  " not in text
