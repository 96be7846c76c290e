"""A stand-in for a code model: canned completions, most right, three instructive failures.

- ``count_vowels`` forgets upper case (an honest bug: a test fails);
- ``fib`` loops forever (the evaluator's timeout ends it);
- ``gcd`` calls ``sys.exit(0)`` before any test runs: it exits with code 0, which a
  checker that trusts exit codes would count as a pass. ``checks.passes`` does not.

Replace ``answer`` with a call to your model: it receives the case's ``input`` (the prompt
and the function's name) and returns ``{"completion": "...function body..."}``.
"""

from oloproof import system

COMPLETIONS = {
    "add": "    return a + b\n",
    "reverse": "    return s[::-1]\n",
    "is_palindrome": "    s = s.lower()\n    return s == s[::-1]\n",
    "fizzbuzz": (
        "    if n % 15 == 0:\n        return 'FizzBuzz'\n    if n % 3 == 0:\n"
        "        return 'Fizz'\n    if n % 5 == 0:\n        return 'Buzz'\n    return str(n)\n"
    ),
    "count_vowels": "    return sum(c in 'aeiou' for c in s)\n",
    "factorial": "    out = 1\n    for i in range(2, n + 1):\n        out *= i\n    return out\n",
    "fib": "    a, b = 0, 1\n    while True:\n        a, b = b, a + b\n",
    "max_of": "    return max(xs)\n",
    "unique_sorted": "    return sorted(set(xs))\n",
    "word_count": "    return len(s.split())\n",
    "celsius": "    return round((f - 32) * 5 / 9, 1)\n",
    "gcd": "    import sys\n    sys.exit(0)\n",
}


@system(name="canned-coder", version="1")
def answer(case_input):
    return {"completion": COMPLETIONS.get(case_input["entry_point"], "    pass\n")}
