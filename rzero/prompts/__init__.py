"""Chat types, the prompt-template reader and each role's prompt; the shipped .txt files."""
