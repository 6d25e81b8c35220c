"""Training data that ships with the project or is read from a file or the hub.

sft.py  the SFT sets SPIN trains on and SPAG mixes into its updates: the embedded worked
        solutions of the easy templates (never an evaluation item), JSONL files, hub
        datasets
"""
