"""SPAG, self-play of an adversarial language game (Cheng et al. 2024; seed 000 §2), on the
run engine:

  game.py   Adversarial Taboo's rules as pure code: the judge, guess parsing, the two word
            match modes, the spelling probe
  words.py  the target words (wordfreq), filtered, split so evaluation words never train
  play.py   the roles' prompts, model and scripted players, batched collection of games
  objective.py   the formulas: turn rewards, the offline self-play loss, imitation
  population.py  the zero-sum audit: win matrix, Bradley–Terry, non-transitivity,
                 exploitability
"""
