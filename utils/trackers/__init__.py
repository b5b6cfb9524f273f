"""Trackers: a run's params, metrics and test in MLflow or Weights & Biases, exactly as its own files hold them.

``hooks.py`` registers the hooks (``mlflow``, ``wandb``); ``tracker_hook.py`` says what a run gives its tracker;
``spool.py`` keeps every record in the run folder before it is sent; ``sender.py`` sends from a thread;
``mlflow_backend.py``, ``wandb_backend.py`` are the clients; ``sweep_parent.py`` makes a sweep one parent run;
``python -m utils.trackers sync RUN`` sends what waits. docs/trackers.md tells the whole.
"""
