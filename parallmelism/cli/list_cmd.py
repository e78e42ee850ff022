"""`parallmelism list models|hardware`: what is available, and where each entry comes from."""

from __future__ import annotations

from typing import List, Optional

import typer

from .common import CONFIG_DIR


def list_(what: str = typer.Argument(..., help="models | hardware"), config_dir: Optional[List[str]] = CONFIG_DIR):
    """List the models or accelerators available (shipped and from config dirs)."""
    from rich.table import Table

    from ..config import option_files, user_config_dirs
    from ..config.compose import _check_dirs, _load_option
    from ..config.paths import origin
    from ..errors import UserError
    from .common import console, fail

    groups = {"models": "model", "model": "model", "hardware": "hardware"}
    try:
        if what not in groups:
            raise UserError(f"cannot list {what!r}; choose models or hardware")
        user_dirs = user_config_dirs(config_dir)
        _check_dirs(user_dirs)
        files = option_files(groups[what], user_dirs)
        table = Table(title=what)
        if groups[what] == "model":
            cols = ["name", "params", "hidden", "layers", "heads", "kv_heads", "ffn", "experts", "from", "file"]
        else:
            cols = [
                "name",
                "bf16 TFLOP/s",
                "HBM GiB",
                "HBM GB/s",
                "scale-up GPUs",
                "scale-up GB/s/dir",
                "scale-out GB/s/dir",
                "from",
                "file",
            ]
        for c in cols:
            table.add_column(c)
        for name, path in sorted(files.items()):
            spec = _load_option(groups[what], name, files)
            source = origin(path, user_dirs)
            if groups[what] == "model":
                from ..cost.params import total_params

                table.add_row(
                    name,
                    f"{total_params(spec) / 1e9:.2f}B",
                    str(spec.hidden),
                    str(spec.layers),
                    str(spec.heads),
                    str(spec.g),
                    str(spec.ffn_hidden),
                    f"{spec.moe.num_experts}x top-{spec.moe.top_k}" if spec.moe else "-",
                    source,
                    str(path),
                )
            else:
                so = spec.scale_out.bandwidth_gbps if spec.scale_out else "-"
                table.add_row(
                    name,
                    f"{spec.peak_tflops['bf16']:g}",
                    f"{spec.hbm_usable_gib:.1f}",
                    f"{spec.hbm_bandwidth_gbps:g}",
                    str(spec.scale_up.domain_size),
                    f"{spec.scale_up.bandwidth_gbps:g}",
                    f"{so}",
                    source,
                    str(path),
                )
        console().print(table)
    except UserError as exc:
        fail(str(exc))
