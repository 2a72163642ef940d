"""The `warc_files` asset: a (cycle, shard) partition's fetches as a WARC/1.1 file, the file
`atlas export-warc` writes. Optional: it is defined beside the crawl assets but kept out of the
crawl job, so a crawl never pays for it; materialize it from the UI or a job of your own."""

import dagster as dg

from atlas_pipeline.bodies import open_bodies
from atlas_pipeline.lake import Lake
from atlas_pipeline.warc import export_warc
from resources.config import AtlasCrawl

from .crawl import FETCHES
from .partitions import cycle_and_shard

WARC_FILES = dg.AssetKey(["crawl", "warc_files"])


def build_warc_asset(partitions: dg.MultiPartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        key=WARC_FILES,
        deps=[FETCHES],
        partitions_def=partitions,
        group_name="archive",
        kinds={"warc"},
    )
    def warc_files(context: dg.AssetExecutionContext, atlas: AtlasCrawl) -> dg.MaterializeResult:
        """Request, response and revisit records (304s and unchanged content) of this
        partition's fetches, from the lake and the stored bodies, in <data_dir>/warc."""
        cycle, shard = cycle_and_shard(context)
        cfg = atlas.crawl_config()
        # the lake and the bodies are all it reads: no coordination store is opened
        written = export_warc(Lake(cfg.lake_uri, cfg.lake_options),
                              open_bodies(cfg.bodies_url, cfg.bodies_path), cfg.user_agent,
                              cycle, shard, cfg.data_dir / "warc")  # fmt: skip
        context.log.info(written.summary())
        return dg.MaterializeResult(
            metadata={
                "path": dg.MetadataValue.path(str(written.path)),
                "bytes": written.bytes,
                "records": dg.MetadataValue.json(written.records),
                "revisits": dg.MetadataValue.json(written.revisits),
                "no_response": written.no_response,
                "missing_bodies": written.missing_bodies,
            }
        )

    return warc_files
