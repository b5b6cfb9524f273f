"""main.py end to end: training, test mode, bad input, users' own code."""
