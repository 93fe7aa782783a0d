"""Report of the critical_noise study: a table of rates and the fitted nu_c (reads data.json)."""

from __future__ import annotations

from pathlib import Path

from studies._common import load_json, markdown_table


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    data = load_json(Path(data_dir) / "data.json")
    s, rows = data["summary"], data["rows"]
    table = markdown_table(["nu / nu_c", "nu", "sigma_1 (closed form)", "particles", "PDE"],
                           [[f"{r['ratio']:.2f}", f"{r['nu']:.4f}", f"{r['sigma']:.4f}", f"{r['particle_rate']:.4f}",
                             f"{r['pde_rate']:.4f}"] for r in rows])
    text = (f"# Critical noise from the particles\n\nnu_c closed form {s['nu_c']:.4f}; from the particles "
            f"(zero of the fitted rate, n = {s['n']}, {s['seeds']} seeds) {s['nu_c_particles']:.4f}; "
            f"d sigma / d nu fitted {s['rate_slope_in_nu']:.3f} (closed form -2).\n\n{table}\n")
    path = Path(out_dir or data_dir) / "report.md"
    path.write_text(text)
    return path
