"""`parallmelism import-hf config.json [--out models/NAME.yaml]`: a model YAML from a local HF config."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .options import a_path


def import_hf(
    config: Path = typer.Argument(..., help="a local Hugging Face config.json (no hub access)"),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", parser=a_path, help="write models/NAME.yaml here (default: print the YAML)"
    ),
    name: Optional[str] = typer.Option(
        None, "--name", help="model name (default: --out's file stem, else the config's _name_or_path or folder)"
    ),
):
    """Turn a Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2/3 incl. MoE) into a model YAML."""
    from ..config.import_hf import default_name, model_from_hf_config, read_hf_config, to_yaml
    from ..config.paths import check_option_name
    from ..errors import UserError
    from ..report.writer import check_not_an_input, write_text
    from .common import console, fail
    from .outputs import check_yaml_out

    try:
        cfg = read_hf_config(config)
        if name is not None:
            check_option_name(name)
        if out is not None:
            check_yaml_out(out)
            check_not_an_input(out, [config])
            if name is not None and name != out.stem:  # a model file's name is its option name
                raise UserError(
                    f"--name {name!r} disagrees with --out's file name {out.stem!r}: model=NAME picks "
                    "models/NAME.yaml, so give one of them (or the same name)"
                )
        model_name = name or (out.stem if out is not None else default_name(cfg, config))
        fields = model_from_hf_config(cfg, model_name, str(config))
        text = to_yaml(fields, str(config))
        if out is None:
            typer.echo(text, nl=False)
            return
        write_text(text, out)
        from ..cost.params import total_params
        from ..specs import ModelSpec

        n = total_params(ModelSpec.model_validate(fields))
        console().print(
            f"wrote {out} ({n:,} parameters); use it with `--config-dir {out.parent.parent} model={model_name}`"
            if out.parent.name == "models"
            else f"wrote {out} ({n:,} parameters)",
            markup=False,
        )
    except UserError as exc:
        fail(str(exc))
