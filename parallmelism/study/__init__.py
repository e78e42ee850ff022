"""Studies: design-space sweeps as one labelled, partitioned dataset that survives failures.

A study (a YAML file, spec.py) names its design points (a cartesian product, zipped lists and/or a
CSV of points over any config field, hardware fields and `model=`/`hardware=` choices included),
the command each point runs (`sweep`: every row; `best`: the winners per GPU count), the dataset
folder it writes and the engine that runs it (engines.py: `local` processes, `ray`, `submitit`).

Layout of a study folder (dataset.py):

    DIR/manifest.json            every point (id, overrides, values), written at launch
    DIR/data/point=ID/part-0.parquet   one hive partition per completed point (temp, then rename)
    DIR/failures/point=ID.json   one record per failed point: point, overrides, one-sentence reason

Workers evaluate points in-process with the project's Python API (worker.py): each composes a base
configuration once and sets each point's fields on it. `parallmelism merge DIR` streams the
partitions into one table (merge.py) and refuses an incomplete study unless told --allow-partial.
"""
