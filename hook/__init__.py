"""Users' hooks, each registered in ``HOOKS``; every file here is imported on first use.

A hook adds behaviour to the training loop (an image grid, a custom schedule,
an extra evaluation) without editing the framework; see ``utils/hook/`` for
the events and their order, and README.md "Add a hook". Select one with
``hooks: [{name: my_hook, <its arguments>}]`` in the config.
"""
