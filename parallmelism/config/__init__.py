"""Configuration edge: Hydra composition, config folders, error translation."""

from .compose import compose, expand_sweeps, load_option, load_run_configs, register_option_files, to_run_config
from .paths import ENV_CONFIG_PATH, data_root, option_files, user_config_dirs

__all__ = [
    "compose",
    "expand_sweeps",
    "load_option",
    "load_run_configs",
    "register_option_files",
    "to_run_config",
    "ENV_CONFIG_PATH",
    "data_root",
    "option_files",
    "user_config_dirs",
]
