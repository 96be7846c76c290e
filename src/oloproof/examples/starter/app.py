"""Your system under test: replace the body with a call to your model or pipeline."""

from oloproof import system


@system(name="my-system", version="1")
def answer(case_input):
    # case_input is the "input" of a case in data/cases.jsonl.
    return {"answer": case_input["question"].strip().rstrip("?") + "."}
