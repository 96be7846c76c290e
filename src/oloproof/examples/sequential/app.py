"""A parity checker that is right on 97% of a 2,000-case suite (the sequential example).

It reads the number in the question and answers "even" or "odd"; numbers written with a
trailing "?!" trip it up (60 of the 2,000 cases), as an edge case trips up a real system.
The small delay stands for a model's latency: the point of a sequential run is the calls it
does not make.
"""

import time

from oloproof import system


@system(name="parity", version="1")
def answer(question: dict) -> dict:
    time.sleep(0.005)
    text = question["text"]
    number = int("".join(ch for ch in text if ch.isdigit()))
    label = "even" if number % 2 == 0 else "odd"
    if text.endswith("?!"):
        label = "odd" if label == "even" else "even"
    return {"label": label}
