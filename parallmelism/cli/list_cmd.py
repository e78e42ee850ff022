"""`parallmelism list models|hardware|engines`: what is available, and where each entry comes from."""

from __future__ import annotations

from typing import List, Optional

import typer

from .options import CONFIG_DIR, WIDE


def list_(
    what: str = typer.Argument(..., help="models | hardware | engines"),
    config_dir: Optional[List[str]] = CONFIG_DIR,
    wide: bool = WIDE,
):
    """List the models, accelerators or serving engines available (shipped and from config dirs)."""
    from ..report.table import fit_table, print_whole
    from ..config import option_files, user_config_dirs
    from ..config.compose import _check_dirs, _load_option
    from ..config.paths import origin
    from ..errors import UserError
    from .common import console, fail

    groups = {"models": "model", "model": "model", "hardware": "hardware", "engines": "engine", "engine": "engine"}
    try:
        if what not in groups:
            raise UserError(f"cannot list {what!r}; choose models, hardware or engines")
        user_dirs = user_config_dirs(config_dir)
        _check_dirs(user_dirs)
        files = option_files(groups[what], user_dirs)
        if groups[what] == "model":
            cols = ["name", "params", "hidden", "layers", "heads", "kv_heads", "ffn", "experts", "from", "file"]
        elif groups[what] == "engine":
            cols = ["name", "engine", "version", "request ms", "iteration ms", "MoE layer us", "from", "file"]
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
        rows = []
        for name, path in sorted(files.items()):
            spec = _load_option(groups[what], name, files)
            source = origin(path, user_dirs)
            if groups[what] == "model":
                from ..cost.params import total_params

                rows.append(
                    [
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
                    ]
                )
            elif groups[what] == "engine":
                rows.append(
                    [
                        name,
                        spec.display_name,
                        spec.version,
                        f"{spec.request_overhead_ms:g}",
                        f"{spec.iteration_overhead_ms:g}",
                        f"{spec.moe_layer_overhead_us:g}",
                        source,
                        str(path),
                    ]
                )
            else:
                so = spec.scale_out.bandwidth_gbps if spec.scale_out else "-"
                rows.append(
                    [
                        name,
                        f"{spec.peak_tflops['bf16']:g}",
                        f"{spec.hbm_usable_gib:.1f}",
                        f"{spec.hbm_bandwidth_gbps:g}",
                        str(spec.scale_up.domain_size),
                        f"{spec.scale_up.bandwidth_gbps:g}",
                        f"{so}",
                        source,
                        str(path),
                    ]
                )
        # names, origins and paths are never cut: a narrow terminal leaves whole columns out (named)
        cells = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
        kinds = {
            c: "value" if c in ("name", "experts", "from", "file", "engine", "version") else "number" for c in cols
        }
        to = console()
        table = fit_table(
            cols,
            cells,
            kinds,
            None if wide else to.width,
            title=what,
            first=("name", "from"),
            keep=("name",),
            hint="--wide shows all",
            right=(),
        )
        if wide:
            print_whole(to, table)
        else:
            to.print(table, crop=False)
    except UserError as exc:
        fail(str(exc))
