"""A help-centre bot that answers from a small FAQ, judged by an LLM.

It answers when a question matches one of its entries and returns an empty
answer otherwise. It also reports what it "spent": here, words stand in for
tokens and a made-up price for cost, to show where such figures go.
"""

from oloproof import current_case, system

FAQ = [
    (("refund", "money back"), "You can ask for a refund within 30 days from the Orders page."),
    (("ship", "deliver"), "Orders ship within two working days; tracking is in your email."),
    (("password",), "Use 'Forgot password' on the sign-in page to get a reset link."),
    (("invoice",), "Invoices are under Billing > History, as PDF."),
    (("cancel",), "Cancel any time under Settings > Plan; you keep access until the period ends."),
    (("opening hours", "open"), "Support is open Monday to Friday, 9:00 to 18:00 CET."),
]

PRICE_PER_TOKEN_USD = 0.000002  # made up: use your provider's prices


@system(name="faq-bot", version="faq-v1")
def answer(case_input):
    question = case_input["question"].lower()
    reply = next((text for keys, text in FAQ if any(k in question for k in keys)), "")
    tokens_in, tokens_out = len(question.split()), len(reply.split())
    current_case().record_usage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=round((tokens_in + tokens_out) * PRICE_PER_TOKEN_USD, 10),
    )
    return reply
