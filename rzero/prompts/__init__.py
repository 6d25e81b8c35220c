"""What a model is asked, and the seam every backend implements.

    chat.py         chat types; completion_text (TRL's completion formats)
    generator.py    the Generator protocol, SamplingParams, GenerationStats, cut_at_stop
    boxed.py        the \\boxed{} answer format: the one brace scanner
    templates.py    the prompt-file reader (the format of the shipped .txt files)
    challenger.py   the challenger's prompt; solver.py: the solver's
    *.txt           the shipped prompts (the official R-Zero ones, and zero-shot variants)

It lives below the engine and labelling, so both can use it without importing each other.
"""
