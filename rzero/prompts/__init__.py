"""What a model is asked.

    chat.py         chat types; completion_text (TRL's completion formats)
    boxed.py        the \\boxed{} answer format: the one brace scanner
    templates.py    the prompt-file reader (the format of the shipped .txt files)
    challenger.py   the challenger's prompt; solver.py: the solver's
    *.txt           the shipped prompts (the official R-Zero ones, and zero-shot variants)

It lives below the engine, generation and labelling, so all of them can use it.
"""
