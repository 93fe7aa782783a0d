"""The workflow on top: solve_* drivers, paired particle/PDE runs, configs, the main job, results,
checkpoints, plots, sweeps and the command line."""
