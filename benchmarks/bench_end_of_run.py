"""What the end of a run costs the step loop: the final checkpoint and the export of
the student, for BERT-base (or ``--model``) after one training step.

    python benchmarks/bench_end_of_run.py --data DATASET [--ds ds_configs/zero1_bf16.json] [--model bert.json]

Times, on this machine's device (the CPU accelerator without a GPU): DeepSpeed's
``save_checkpoint``, the checkpoint's record (every file's checksum), the export from
the fp32 masters in memory (gathered by every rank), those three one after the
other, and (first, with nothing warm) the end of ``Trainer.train()`` itself: its
last step's checkpoint and the export, written in a thread while the checkpoint is
saved and recorded (``Trainer.export()``, which ``train()`` calls for both, timed as
``train()`` calls it); for comparison the export from the checkpoint on disk (``python -m tacl_scale.export``: DeepSpeed's ``zero_to_fp32`` or
its universal conversion). The issue's target: the final checkpoint and export of a
BERT-base run in at most 5 s of the loop's time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_train_gpu import BERT_BASE  # noqa: E402  (this folder is on the path of a script run from it)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="a dataset directory (its vocabulary ≤ the model's)")
    p.add_argument("--ds", type=Path, default=ROOT / "ds_configs" / "zero1_bf16.json")
    p.add_argument("--model", type=Path, default=None, help="a BertConfig JSON (default: BERT-base)")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from tacl_scale import checkpoint
    from tacl_scale.config import CheckpointConfig, DataConfig, EngineConfig, OptimConfig, TrainConfig
    from tacl_scale.distributed import Distributed, LaunchEnv
    from tacl_scale.export import export_checkpoint, export_weights
    from tacl_scale.master_weights import engine_master_weights
    from tacl_scale.trainer import Trainer

    with tempfile.TemporaryDirectory(prefix="tacl-end-of-run-") as tmp:
        work = Path(tmp)
        model = args.model
        if model is None:
            model = work / "bert.json"
            model.write_text(json.dumps(BERT_BASE))
        config = TrainConfig(model=str(model), output=str(work / "run"), engine=EngineConfig.from_file(args.ds),
                             data=DataConfig((str(args.data),), num_workers=0),
                             optim=OptimConfig(steps=3, batch_size=2, micro_batch_size=2),
                             checkpoint=CheckpointConfig(save_every=10**9), eval_every=0, export=True)
        # Standalone, as tacl-train in a shell: its port picked as it binds (again if taken).
        trainer = Trainer.build(config, Distributed.setup(LaunchEnv.standalone_here()))
        try:
            trainer.train_step().read()  # warm-up
            ends: list[float] = []
            export = trainer.export

            def timed_export() -> None:  # the run's end: the last save and the export beside it
                started = time.perf_counter()
                export()
                ends.append(time.perf_counter() - started)

            trainer.export = timed_export  # type: ignore[method-assign]
            trainer.train()  # the last steps, then the run's end as every run ends
            together = ends[0]
            tag = checkpoint.tag_for(4)  # then the same parts one at a time (after the first save's warm-up)
            started = time.perf_counter()
            trainer.engine.save_checkpoint(str(trainer.run.checkpoints), tag=tag, save_latest=False)
            saved = time.perf_counter()
            checkpoint.record_files(trainer.run.checkpoints / tag)
            recorded = time.perf_counter()
            weights = engine_master_weights(trainer.engine)
            export_weights(weights, trainer.run.path, work / "export")
            exported = time.perf_counter()
            size = sum(f.stat().st_size for f in (trainer.run.checkpoints / tag).rglob("*") if f.is_file())
            export_checkpoint(trainer.run.checkpoints / tag, work / "export-from-disk")
            from_disk = time.perf_counter() - exported
        finally:
            trainer.close()
    rows = [("save_checkpoint", saved - started), ("record (checksum of every file)", recorded - saved),
            ("export from memory", exported - recorded)]
    print(f"{trainer.dist.device} | {args.ds.name} | checkpoint {size / 1e9:.2f} GB")
    for name, seconds in rows:
        print(f"{name:>40}: {seconds:6.2f} s")
    print(f"{'one after the other':>40}: {exported - started:6.2f} s")
    print(f"{'end of train() (side by side)':>40}: {together:6.2f} s   (target <= 5 s)")
    print(f"{'export from the checkpoint on disk':>40}: {from_disk:6.2f} s   (python -m tacl_scale.export)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
