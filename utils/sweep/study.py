"""The sweep's Optuna study: its storage (a journal file in the sweep's folder by default, which several
processes on one machine or a shared filesystem share; SQLite or a database URL for several machines), its
sampler and pruner, and the trials a killed sweep left running.

Optuna is imported here only: a run that is no sweep never loads it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from utils.errors import ConfigError, first_line
from utils.secret_text import reveal
from utils.sweep.attrs import check_attrs
from utils.sweep.journal import repair_journal

# trial user attributes: who runs it, which configuration, whether a later trial took it over, which earlier
# trial already had its configuration (a sampler drew it again)
HOST, PID, CONFIG_ID, REQUEUED, SAME_AS = "host", "pid", "config_id", "requeued", "same_as"
# the pip package of each database driver SQLAlchemy imports (by module name)
DRIVERS = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]", "pymysql": "PyMySQL", "MySQLdb": "mysqlclient"}


def optuna_module() -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError("--sweep needs Optuna; install it with: pip install optuna") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def storage_url(storage: Optional[str], folder: Path) -> str:
    """What the study's storage is called: a database URL as given, else a journal file (default: in ``folder``)."""
    if storage and "://" in storage:
        return storage
    return str(Path(storage).expanduser().resolve() if storage else folder.resolve() / "study.journal")


def open_storage(url: str) -> Any:
    """The study's storage: a journal file (the records a crash cut short dropped first: ``journal.py``) or a
    database; one ConfigError line naming the problem and the fix when it cannot be opened."""
    optuna = optuna_module()
    if "://" in url:
        return _database(optuna, url)
    path = Path(url)
    if not path.parent.is_dir():  # never made here: on a shared filesystem, a folder of its own per machine
        raise ConfigError(
            f"the study journal's folder '{path.parent}' does not exist; create it (on the filesystem the sweep's "
            "machines share, if they share the study) or give storage another path"
        )
    if path.exists() and not path.is_file():  # a FIFO blocks Optuna's open for ever; a folder or device is no journal
        raise ConfigError(
            f"the study journal '{path}' is not a regular file (a folder, FIFO or device); give storage the path of "
            "a journal file, or of one to create"
        )
    lock = optuna.storages.journal.JournalFileOpenLock(url)
    try:
        repair_journal(path, lock)
        backend = optuna.storages.journal.JournalFileBackend(url, lock_obj=lock)
        return optuna.storages.journal.JournalStorage(backend)
    except OSError as err:
        raise ConfigError(
            f"cannot open the study journal '{url}' ({err.strerror or err}); give storage a file the sweep can write"
        ) from None


CREATE_TRIES = 5  # workers started together each create the schema of a new database; all but one find it made


def _database(optuna: Any, url: str) -> Any:
    import sqlalchemy.exc

    try:
        for attempt in range(1, CREATE_TRIES + 1):
            try:
                return optuna.storages.RDBStorage(reveal(url))  # its password only here (utils/secret_text.py)
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.OperationalError) as err:
                # another worker creating the same new database at this moment ("UNIQUE constraint failed:
                # alembic_version", "table ... already exists"): the schema it wrote is there on the next try
                if attempt == CREATE_TRIES or not created_beside(err):
                    raise
                time.sleep(0.2 * attempt)
    except ImportError as err:  # Optuna's, from SQLAlchemy's import of the URL's driver
        module = getattr(err.__cause__, "name", None) or "its driver"
        raise ConfigError(
            f"storage {shown_url(url)} needs the database driver {module}, which is not installed; "
            f"pip install {DRIVERS.get(module, module)}"
        ) from None
    except sqlalchemy.exc.ArgumentError as err:
        raise ConfigError(
            f"storage {shown_url(url)} is not a database URL ({first_line(err)}); give sqlite:///F.db, "
            "postgresql://user@host/db or a journal file's path"
        ) from None
    except sqlalchemy.exc.DatabaseError as err:  # not a database, cannot be opened, no server
        fix = (
            "it must be an SQLite database (or a new file) in a folder the sweep can write: give another file, or "
            "restore it from a copy"
            if url.startswith("sqlite")
            else "check that the server runs and that the URL's user, host and database are right"
        )
        raise ConfigError(f"cannot open storage {shown_url(url)} ({first_line(err.orig or err)}); {fix}") from None


def created_beside(err: Exception) -> bool:
    """Whether ``err`` is what creating a database's schema raises while another process creates it too."""
    text = str(getattr(err, "orig", None) or err)
    return "UNIQUE constraint failed: alembic_version" in text or "already exists" in text


def shown_url(url: str) -> str:
    """``url`` as messages show it: a database URL's password hidden."""
    if "://" not in url:
        return url
    import sqlalchemy.engine
    import sqlalchemy.exc

    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return url.split("://", 1)[0] + "://..."


def space_distributions(space: List[Any]) -> Dict[str, Any]:
    """Optuna's distribution of every key of the space (listed values as JSON text: Optuna's choices are scalars)."""
    optuna = optuna_module()
    made = {}
    for dim in space:
        if dim.discrete:
            made[dim.key] = optuna.distributions.CategoricalDistribution([json.dumps(v) for v in dim.values])
        elif dim.kind == "int":
            made[dim.key] = optuna.distributions.IntDistribution(*dim.values)
        else:
            made[dim.key] = optuna.distributions.FloatDistribution(*dim.values, log=dim.kind == "log_uniform")
    return made


def open_study(spec: Any, url: str, direction: str) -> Any:
    """The study named after the sweep, created or loaded (the same command continues it): ConfigError when the
    loaded study was made for another direction."""
    optuna = optuna_module()
    sampler = {
        "grid": lambda: _grid_sampler(optuna)(
            {k: d.choices for k, d in space_distributions(spec.space).items()}, seed=0
        ),
        "random": lambda: optuna.samplers.RandomSampler(seed=0),
        "tpe": lambda: optuna.samplers.TPESampler(seed=0),
    }[spec.sampler]()
    pruner = make_pruner(spec.pruner)
    study = optuna.create_study(
        storage=open_storage(url),
        study_name=spec.name,
        direction=direction,
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    if study.direction.name.lower() != direction:  # what else changed since it began: changes.py
        raise ConfigError(
            f"the study '{spec.name}' in {shown_url(url)} was made to {study.direction.name.lower()}, this sweep's "
            f"eval.monitor to {direction}; use the same eval.monitor, or run this sweep under another experiment.name"
        )
    check_attrs(study, shown_url(url))
    return study


def _grid_sampler(optuna: Any) -> Any:
    class Grid(optuna.samplers.GridSampler):
        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            """Nothing: the grid sampler stops ``study.optimize`` when its grid is used up, which outside ``optimize``
            (the sweep asks and tells) is an error; the sweep counts its trials itself."""

    return Grid


def make_pruner(name: str) -> Any:
    """The pruner of that name; the sweep and each trial's run make the same one (a storage does not keep it)."""
    optuna = optuna_module()
    return {
        "none": optuna.pruners.NopPruner,
        "median": lambda: optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0),
        "hyperband": optuna.pruners.HyperbandPruner,
    }[name]()


def trial_in(url: str, study_name: str, trial_id: int, pruner: str) -> Any:
    """A running trial of the study, opened from a trial's own process (its run reports to it)."""
    optuna = optuna_module()
    study = optuna.load_study(study_name=study_name, storage=open_storage(url), pruner=make_pruner(pruner))
    check_attrs(study, shown_url(url))
    return optuna.trial.Trial(study, trial_id)


def trial_id(storage: Any, study_name: str, number: int) -> int:
    """The storage's id of trial ``number`` of the study (KeyError when the study or the trial is not there)."""
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study_name), number)


def running_trial(url: str, study_name: str, number: int) -> int:
    """The id of the study's running trial ``number``, which a run of the sweep reports to; one ConfigError line
    when the storage does not open, or the study, the trial or its running state is not there."""
    optuna = optuna_module()
    storage, where = open_storage(url), shown_url(url)
    fix = "--sweep names its running trial to each run it starts; outside a sweep leave out the --trial options"
    try:
        storage.get_study_id_from_name(study_name)
    except KeyError:
        raise ConfigError(f"--trial-study '{study_name}': no such study in {where}; {fix}") from None
    try:
        found = trial_id(storage, study_name, number)
    except KeyError:
        raise ConfigError(f"--trial {number}: study '{study_name}' in {where} has no trial {number}; {fix}") from None
    state = storage.get_trial(found).state
    if state != optuna.trial.TrialState.RUNNING:
        raise ConfigError(
            f"--trial {number} of study '{study_name}' in {where} is {state.name.lower()}, not running: a run "
            f"reports only to a running trial; {fix}"
        )
    return found


def requeue_dead_trials(study: Any, url: str) -> List[int]:
    """Trials left RUNNING by a sweep process of this host that is gone (kill -9, a crash): each is marked failed and
    its parameters queued again under the same configuration, whose runs then resume. Returns their numbers."""
    optuna = optuna_module()
    requeued = []
    storage = None
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        attrs = trial.user_attrs
        if attrs.get(HOST) != socket.gethostname() or _alive(int(attrs.get(PID, -1))):
            continue
        if storage is None:  # a second handle on the study's storage: the study keeps its own to itself
            storage = open_storage(url)
        dead = trial_id(storage, study.study_name, trial.number)
        storage.set_trial_user_attr(dead, REQUEUED, True)  # its configuration runs on
        storage.set_trial_state_values(dead, optuna.trial.TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs={CONFIG_ID: attrs.get(CONFIG_ID, trial.number)})
        requeued.append(trial.number)
    return requeued


def claim(trial: Any) -> int:
    """Mark ``trial`` as this process's and return its configuration number (kept by re-queued trials)."""
    config_id = int(trial.user_attrs.get(CONFIG_ID, trial.number))
    for key, value in ((CONFIG_ID, config_id), (HOST, socket.gethostname()), (PID, os.getpid())):
        trial.set_user_attr(key, value)
    return config_id


def configuration(trial: Any) -> int:
    """The trial's configuration number: its own, or the one of the trial it carries on (queued again)."""
    return int(trial.user_attrs.get(CONFIG_ID, trial.number))


def carried_on(trials: List[Any]) -> Dict[int, int]:
    """``{trial number: the later trial that carries its configuration on}`` (queued again after a crash, or to
    train added seeds): that later trial's runs and value are the configuration's."""
    latest = {configuration(t): t.number for t in trials}
    return {t.number: latest[configuration(t)] for t in trials if latest[configuration(t)] != t.number}


def used(study: Any) -> int:
    """Configurations the study has tried or is trying, which count against ``trials`` (once each)."""
    return len({configuration(t) for t in study.get_trials(deepcopy=False)})


def continue_trials(study: Any) -> List[int]:
    """Queue each finished configuration again (its parameters, its number), to train seeds added since it
    finished: its runs of the other seeds are found done. Returns the numbers of the trials queued again."""
    optuna = optuna_module()
    trials = study.get_trials(deepcopy=False)
    later = carried_on(trials)
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.number not in later]
    for trial in done:
        study.enqueue_trial(trial.params, user_attrs={CONFIG_ID: configuration(trial)})
    return [t.number for t in done]


def drawn_before(study: Any, trial: Any) -> Optional[Any]:
    """The latest other trial with ``trial``'s parameters, if any: a sampler may draw a configuration again (a
    random or TPE one, or a grid whose points are all taken when workers ask at once)."""
    same = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number and t.params == trial.params]
    return same[-1] if same else None


def waiting(study: Any) -> bool:
    optuna = optuna_module()
    return bool(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process of that number
        return True
    return True
