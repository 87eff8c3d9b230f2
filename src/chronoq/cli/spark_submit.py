"""The script ``spark-submit`` runs for ``chronoq analyze`` on a cluster; it
takes the same options as the command (docs/pipeline.md)::

    spark-submit --master yarn \\
        $(python -c 'import chronoq.cli.spark_submit as s; print(s.__file__)') \\
        --events hdfs:///chronoq/events --out hdfs:///chronoq/analysis --report report.html
"""

from __future__ import annotations

import sys

from chronoq.cli.main import cli

if __name__ == "__main__":
    cli(["analyze", *sys.argv[1:]], prog_name="chronoq")
