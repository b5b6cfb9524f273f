"""Sweeps over hyperparameters and seeds on Optuna's storages (``python main.py --sweep SWEEP.yaml``).

``spec.py`` reads and checks the sweep file; ``study.py`` opens the study (a journal file in the sweep's
folder, SQLite or a database URL) and its sampler and pruner; ``journal.py`` repairs a journal a crash cut
short; ``changes.py`` decides what a changed sweep file does to its study; ``trial_runs.py`` trains one
configuration's seeds as ordinary runs (resumed where a killed sweep left them); ``driver.py`` runs the trials,
``parallel`` at once, and writes the table of trials; ``pruning.py`` is the judge a trial's run asks after each
validation.
"""
