"""``python main.py --mode compare PATH ... [--output DIR]``: runs grouped by configuration, their test metrics as
mean, std, 95% Student-t interval and Welch p-value over the seeds, written as a table and a figure.

One idea per file, in the order the command uses them: ``collect.py`` (which folders are runs, what each
recorded), ``group.py`` (configurations: the config keys that differ, seed aside), ``monitor.py`` (the metric
and direction that rank them), ``stats.py`` (the statistics), ``ranking.py`` (the rows), ``table.py``
(compare.csv, compare.md), ``figure.py`` (compare.png) and ``command.py`` (the mode itself: reads, writes,
prints). It needs no config, no process group and no device; it never writes inside a run folder.
"""
