"""Take a load kept by `memwarden bench scale --data-dir DIR` back to an older migration, so an older
checkout of Memwarden can `--reuse` it (its serve refuses a database at a revision it does not know).

    python dev/bench-records/scale-downgrade.py DIR [REVISION]      # REVISION defaults to 0033

Used for the alternating before/after runs of issue 25's third large-scope pass (docs/benchmarks.md):
this checkout's `bench scale --reuse DIR` upgrades the load again when it starts the server.
Run it from a checkout that has the migrations being undone.
"""

import sys
import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine

from app.bench import common
from app.db.database import MIGRATIONS_DIR
from app.db.embedded import start_embedded


def main() -> None:
    data_dir = Path(sys.argv[1]).expanduser().resolve() / ".memwarden"
    revision = sys.argv[2] if len(sys.argv) > 2 else "0033"
    server = start_embedded(data_dir)
    engine = create_engine(server.admin_url)
    try:
        with engine.connect() as conn:
            cfg = Config()
            cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
            cfg.attributes["connection"] = conn
            started = time.perf_counter()
            command.downgrade(cfg, revision)
            conn.commit()
            print(f"downgraded to {revision} in {time.perf_counter() - started:.2f} s")
    finally:
        engine.dispose()
        common.stop_cluster(data_dir)


if __name__ == "__main__":
    main()
