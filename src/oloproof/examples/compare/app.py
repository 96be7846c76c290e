"""The candidate: support_bot's keyword rules with the keywords its misses called for (keywords-v2).

Four more keywords ("reimburse", "package", "profile", "paypal") fix four of the
baseline's five misses. The fifth ("Is this jacket waterproof when I ship it to the
mountains?") still reads as a shipping question: keywords cannot tell.
"""

from oloproof import system

RULES = [
    ("refund", ("refund", "money back", "return", "reimburse")),
    ("shipping", ("ship", "deliver", "track", "parcel", "package")),
    ("account", ("password", "log in", "login", "account", "email address", "profile")),
    ("billing", ("invoice", "charge", "billing", "card", "paypal")),
]

ANSWERS = {
    "refund": "You can request a refund within 30 days from your orders page.",
    "shipping": "Orders ship within two working days; the tracking link is in your email.",
    "account": "You can reset your password or change your email from Account settings.",
    "billing": "Invoices and charges are listed under Billing in your account.",
    "other": "Thanks for reaching out: a member of our team will get back to you.",
}


@system(name="support-bot", version="keywords-v2")
def answer(case_input):
    question = case_input["question"].lower()
    for label, keywords in RULES:
        if any(word in question for word in keywords):
            return {"label": label, "answer": ANSWERS[label]}
    return {"label": "other", "answer": ANSWERS["other"]}
