"""The challenger's questions whose answer can be computed: a bare arithmetic expression
("What is 17 × 23 + 4?", "Compute (3/4) + 5^2.", "Calculate 120 divided by 8"). On them a
vote label's agreement with the truth is known exactly, with no judge: the subset of a
self-play pool on which R-Zero's claim that label accuracy falls as questions get harder
(seed 000 §4.3, 71 % → 42 % by a GPT-4o judge over 200 questions) can be checked offline.

Only a question that is nothing but a lead-in ("what is", "compute", "calculate",
"evaluate", "find", "the value of") and one expression of numbers, + − × ÷ / ^ *,
parentheses and the words plus, minus, times, multiplied by, divided by is computable;
anything else (a word problem, a variable, a unit) is not, so the subset is small and
skewed to the easiest questions: say so beside any number from it. The expression is
evaluated exactly (`fractions.Fraction`), never by `eval`: Python's parser reads it and
only number literals and the four operations and small integer powers are accepted.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction

LEAD_IN = re.compile(
    r"^\s*(?:(?:what\s+is|what's|compute|calculate|evaluate|find|simplify|determine)\s+)?"
    r"(?:the\s+(?:value|result)\s+of\s+)?",
    re.IGNORECASE,
)
WORDS = (  # LaTeX first: "\times" holds the word "times"
    (r"\\times", "*"),
    (r"\\cdot", "*"),
    (r"\\div", "/"),
    (r"\bmultiplied\s+by\b", "*"),
    (r"\bdivided\s+by\b", "/"),
    (r"\btimes\b", "*"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
)
SYMBOLS = str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-", "–": "-", "^": "**"})
EXPRESSION = re.compile(r"^[\d\s.+\-*/()]+$")
MAX_EXPONENT = 12
MAX_DIGITS = 40


def computed_answer(question: str) -> str | None:
    """The exact answer of a question that is one arithmetic expression: an integer
    ("395"), a fraction in lowest terms ("7/4") or, for a decimal input, the decimal the
    fraction ends in when it does ("0.75"); None for any other question, or one whose
    expression divides by zero or grows past MAX_DIGITS digits."""
    text = question.strip().rstrip("?.!:= ").strip()
    text = LEAD_IN.sub("", text, count=1)
    text = text.replace("$", "").replace("\\(", "").replace("\\)", "")
    for pattern, symbol in WORDS:
        text = re.sub(pattern, symbol, text, flags=re.IGNORECASE)
    text = text.translate(SYMBOLS).replace("{", "(").replace("}", ")")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 -> 1000
    if not text.strip() or not EXPRESSION.match(text) or not re.search(r"\d", text):
        return None
    if not re.search(r"\d\s*(?:\*\*|[+\-*/])\s*[\d(]", text):
        return None  # a lone number is not a question to compute
    try:
        tree = ast.parse(text.strip(), mode="eval")
        value = _value(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError):
        return None
    return _render(value, decimal="." in text)


def _value(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        inner = _value(node.operand)
        return inner if isinstance(node.op, ast.UAdd) else -inner
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Add):
            out = left + right
        elif isinstance(node.op, ast.Sub):
            out = left - right
        elif isinstance(node.op, ast.Mult):
            out = left * right
        elif isinstance(node.op, ast.Div):
            out = left / right
        elif isinstance(node.op, ast.Pow):
            if right.denominator != 1 or abs(right) > MAX_EXPONENT:
                raise ValueError("only small integer powers")
            out = left ** int(right)
        else:
            raise ValueError("not an arithmetic operation")
        if max(len(str(out.numerator)), len(str(out.denominator))) > MAX_DIGITS:
            raise ValueError("too large")
        return out
    raise ValueError("not an arithmetic expression")


def _render(value: Fraction, decimal: bool) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    if decimal:
        d = value.denominator
        for p in (2, 5):
            while d % p == 0:
                d //= p
        if d == 1:  # a terminating decimal
            return f"{float(value):.12g}"
    return f"{value.numerator}/{value.denominator}"
