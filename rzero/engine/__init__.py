"""The machinery that runs models, knowing no algorithm."""
