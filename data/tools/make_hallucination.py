"""Generate the bundled EO hallucination-detection sample set (EVE Hugging Face schema).

Writes data/hallucination_detection.jsonl deterministically, with columns
  Question, Answer, Soft labels [{start, end, text, prob}], Hard labels [[start, end]], is_hallucinated

Offsets are never typed by hand: each row names the false substrings of its answer and the
offsets are found with str.find (each substring must occur exactly once). Offsets are character
offsets into Answer, end exclusive, so Answer[start:end] is exactly the false text.

Soft labels normally repeat the hard spans with an annotator-style probability; a few rows give a
slightly wider or narrower soft span (`soft=`), as real annotations do.

Run:  python data/tools/make_hallucination.py
"""
from __future__ import annotations

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1]
OUT = DATA_DIR / "hallucination_detection.jsonl"

# Correct answers: no labels.
CORRECT: list[tuple[str, str]] = [
    ("What is the spatial resolution of Sentinel-2's visible bands?",
     "Sentinel-2's visible bands B2 (blue), B3 (green) and B4 (red) are acquired at 10 m spatial resolution, "
     "as is the near-infrared band B8."),
    ("At what frequency does the Sentinel-1 SAR operate?",
     "Sentinel-1 carries a C-band synthetic aperture radar with a centre frequency of 5.405 GHz, "
     "corresponding to a wavelength of about 5.5 cm."),
    ("How is NDVI calculated?",
     "NDVI is calculated as (NIR − Red) / (NIR + Red). Its values range from −1 to +1, with dense green "
     "vegetation giving high positive values."),
    ("What is the revisit time of Sentinel-2?",
     "Each Sentinel-2 satellite revisits the equator every 10 days; with two satellites in the same orbit, "
     "phased 180° apart, the revisit time is 5 days."),
    ("What spatial resolutions does Landsat 8 provide?",
     "Landsat 8's OLI acquires multispectral bands at 30 m and a panchromatic band at 15 m, while the TIRS "
     "thermal bands are acquired at 100 m."),
    ("What is a sun-synchronous orbit?",
     "A sun-synchronous orbit is a near-polar orbit whose plane precesses by about one degree per day, so the "
     "satellite crosses each latitude at the same local solar time. This keeps illumination conditions "
     "consistent between acquisitions."),
    ("What is speckle in SAR imagery?",
     "Speckle is a granular, noise-like pattern caused by coherent interference of the returns from many "
     "scatterers within each resolution cell. It can be reduced by multilooking or adaptive filters such as "
     "the Lee filter, at the cost of spatial resolution."),
    ("What does Sentinel-5P measure?",
     "Sentinel-5P carries TROPOMI, a spectrometer that measures atmospheric trace gases such as nitrogen "
     "dioxide, ozone, sulphur dioxide, methane, carbon monoxide and formaldehyde, as well as aerosols and clouds."),
    ("What is the difference between Sentinel-2 Level-1C and Level-2A products?",
     "Level-1C products contain orthorectified top-of-atmosphere reflectance, whereas Level-2A products contain "
     "bottom-of-atmosphere reflectance obtained by atmospheric correction with Sen2Cor."),
    ("What is brightness temperature?",
     "Brightness temperature is the temperature a blackbody would need to emit the radiance measured by the "
     "sensor at a given wavelength. For a surface with emissivity below one it is lower than the surface's "
     "actual temperature."),
    ("How does the Normalized Burn Ratio work?",
     "The Normalized Burn Ratio is computed as (NIR − SWIR) / (NIR + SWIR) with a shortwave-infrared band near "
     "2.2 µm. Burned areas have low NIR and high SWIR reflectance, so NBR drops after a fire."),
    ("What is GEDI?",
     "GEDI is a full-waveform LiDAR on the International Space Station that measures forest vertical structure "
     "and canopy height. Its laser footprints are about 25 m in diameter."),
    ("How high is a geostationary orbit?",
     "A geostationary satellite orbits about 35,786 km above the equator with a period of one sidereal day, so "
     "it appears fixed over one point on the Earth."),
    ("Why does calm water appear dark in SAR images?",
     "Calm water acts as a specular reflector, so most of the radar energy is reflected away from the "
     "side-looking sensor and little returns to the antenna."),
    ("What is SAR interferometry used for?",
     "SAR interferometry uses the phase difference between two SAR acquisitions to map topography or, with "
     "differential InSAR, surface deformation. In repeat-pass DInSAR one fringe corresponds to half a "
     "wavelength of line-of-sight motion, about 2.8 cm for Sentinel-1."),
    ("What are the Copernicus services?",
     "Copernicus has six core services: land, marine, atmosphere, climate change, emergency management and "
     "security. The atmosphere (CAMS) and climate change (C3S) services are implemented by ECMWF."),
    ("What is the purpose of ICESat-2?",
     "ICESat-2 carries ATLAS, a photon-counting laser altimeter operating at 532 nm with six beams, to measure "
     "changes in ice sheet elevation, sea ice freeboard and vegetation height."),
    ("What is radiometric resolution?",
     "Radiometric resolution is a sensor's ability to distinguish small differences in the recorded signal, "
     "usually expressed as a bit depth. A 12-bit sensor such as the Sentinel-2 MSI records 4096 levels."),
    ("How does EVI differ from NDVI?",
     "EVI adds the blue band to correct for aerosol influences and a canopy background term, which makes it "
     "less prone to saturation over dense vegetation. Its standard form is "
     "2.5 × (NIR − Red) / (NIR + 6 × Red − 7.5 × Blue + 1)."),
    ("What is MODIS?",
     "MODIS is a 36-band imaging spectroradiometer on NASA's Terra and Aqua satellites. It covers the globe "
     "every one to two days at 250 m, 500 m and 1 km resolution."),
    ("What is dark object subtraction?",
     "Dark object subtraction is an image-based atmospheric correction that assumes the darkest pixels in a "
     "scene should have near-zero reflectance. Their measured signal is attributed to atmospheric path "
     "radiance and subtracted from the whole band."),
    ("What is EnMAP?",
     "EnMAP is a German spaceborne hyperspectral mission that covers roughly 420 to 2450 nm with a ground "
     "sampling distance of 30 m and a swath of 30 km."),
    ("What is GNSS reflectometry?",
     "GNSS reflectometry is a bistatic radar technique that uses navigation signals reflected from the Earth's "
     "surface. NASA's CYGNSS constellation uses it to estimate ocean surface wind speed, including inside "
     "tropical cyclones."),
    ("What is SMOS?",
     "SMOS is an ESA mission that measures soil moisture and ocean salinity with an L-band passive "
     "interferometric radiometer operating at 1.4 GHz."),
    ("What is PRISMA?",
     "PRISMA is a hyperspectral mission of the Italian Space Agency, launched in 2019, that also carries a "
     "5 m panchromatic camera."),
]

# Hallucinated answers: (question, answer, [(false substring, prob)], soft overrides or None).
# soft overrides: [(soft substring, prob)] replacing the default soft labels (= hard spans with prob).
HALLUCINATED: list[tuple[str, str, list[tuple[str, float]], list[tuple[str, float]] | None]] = [
    ("Which Sentinel-2 bands are acquired at 10 m?",
     "Sentinel-2 acquires bands B2, B3, B4 and B5 at 10 m resolution, and its swath width is 290 km.",
     [("B5", 1.0)], None),
    ("What is the orbit altitude of Sentinel-2?",
     "The Sentinel-2 satellites fly in a sun-synchronous orbit at an altitude of 693 km, which gives each "
     "satellite a revisit time of 16 days at the equator.",
     [("693 km", 1.0), ("16 days", 0.9)], None),
    ("Which radar band does Sentinel-1 use?",
     "Sentinel-1 carries an L-band synthetic aperture radar operating at 5.405 GHz, which lets it image "
     "through clouds by day and night.",
     [("L-band", 1.0)], None),
    ("How is McFeeters' NDWI computed?",
     "McFeeters' NDWI is computed as (Red − NIR) / (Red + NIR), and open water usually has positive values.",
     [("(Red − NIR) / (Red + NIR)", 0.9)], [("(Red − NIR)", 0.7), ("(Red + NIR)", 0.7)]),
    ("What are the spatial resolutions of Landsat 9?",
     "Landsat 9's OLI-2 acquires multispectral bands at 30 m and a panchromatic band at 10 m, while its TIRS-2 "
     "thermal bands have 60 m resolution.",
     [("10 m", 1.0), ("60 m", 1.0)], None),
    ("What does TROPOMI measure?",
     "TROPOMI, the instrument on Sentinel-5P, measures trace gases such as nitrogen dioxide, methane and carbon "
     "monoxide, and it also measures sea surface height with its radar altimeter.",
     [("it also measures sea surface height with its radar altimeter", 0.8)], None),
    ("What is a geostationary orbit?",
     "A geostationary orbit lies about 20,200 km above the equator and has a period of 12 hours, so the "
     "satellite appears fixed above one point.",
     [("20,200 km", 1.0), ("12 hours", 1.0)], None),
    ("How many bands does MODIS have?",
     "MODIS has 36 spectral bands and flies on the Terra and Landsat 8 satellites, with a finest resolution "
     "of 250 m.",
     [("Landsat 8", 1.0)], None),
    ("Which LiDAR measures forest structure from the International Space Station?",
     "GEDI, a discrete-return LiDAR on the International Space Station, measures forest canopy height using "
     "laser footprints about 25 m in diameter.",
     [("discrete-return", 0.9)], [("a discrete-return LiDAR", 0.7)]),
    ("What laser does ICESat-2 use?",
     "ICESat-2's ATLAS instrument is a photon-counting LiDAR that uses a 1064 nm laser split into four beams.",
     [("1064 nm", 1.0), ("four", 0.8)], None),
    ("What is the difference between radiance and reflectance?",
     "Radiance is the radiant flux per unit area per unit solid angle, typically in W m⁻² sr⁻¹ µm⁻¹, whereas "
     "reflectance is expressed in kelvin.",
     [("expressed in kelvin", 1.0)], [("kelvin", 0.9)]),
    ("What is emissivity?",
     "Emissivity is the ratio of the radiance emitted by a surface to that of a blackbody at the same "
     "temperature; for natural surfaces it is typically greater than 1.",
     [("greater than 1", 1.0)], None),
    ("What does Sen2Cor do?",
     "Sen2Cor is ESA's processor that converts Sentinel-1 GRD data into Level-2A bottom-of-atmosphere "
     "reflectance, and it also produces a scene classification map.",
     [("Sentinel-1 GRD", 1.0)], None),
    ("What does Rayleigh scattering depend on?",
     "Rayleigh scattering is caused by particles much larger than the wavelength and is proportional to the "
     "inverse square of the wavelength, so it mainly affects thermal infrared bands.",
     [("larger", 1.0), ("inverse square", 0.9), ("thermal infrared bands", 0.8)],
     [("much larger than", 0.6), ("inverse square", 0.9), ("thermal infrared bands", 0.8)]),
    ("What are the processing levels of satellite data?",
     "Level 0 is raw instrument data, Level 1B contains calibrated radiances, and Level 3 contains "
     "unprocessed telemetry at full resolution.",
     [("unprocessed telemetry at full resolution", 0.9)], None),
    ("What is the repeat cycle of Sentinel-1?",
     "Each Sentinel-1 satellite has a repeat cycle of 16 days in a sun-synchronous orbit at 693 km altitude.",
     [("16 days", 1.0)], None),
    ("What is interferometric coherence?",
     "Coherence measures the correlation between two complex SAR images and ranges from 0 to 100; it "
     "increases when vegetation grows between acquisitions.",
     [("100", 0.8), ("increases", 1.0)], [("0 to 100", 0.5), ("increases", 1.0)]),
    ("Which Copernicus service covers the oceans?",
     "The Copernicus Marine Service (CMEMS) provides ocean forecasts and reanalyses and is implemented by ECMWF.",
     [("ECMWF", 0.8)], None),
    ("Which country operates the EnMAP hyperspectral mission?",
     "EnMAP is an Italian hyperspectral mission with a 30 m ground sampling distance, covering roughly 420 to "
     "2450 nm.",
     [("Italian", 1.0)], None),
    ("What instruments does PRISMA carry?",
     "PRISMA carries a hyperspectral imager with 30 m resolution and an X-band SAR.",
     [("X-band SAR", 1.0)], [("an X-band SAR", 1.0)]),
    ("Which Sentinel-2 bands are used for NDVI?",
     "For Sentinel-2, NDVI is usually computed from band B8 (NIR) and band B11 (red) at 10 m resolution.",
     [("B11", 1.0)], None),
    ("What is the EVI formula?",
     "EVI is computed as 2.5 × (NIR − Red) / (NIR + 6 × Red − 7.5 × Green + 1).",
     [("Green", 1.0)], None),
    ("How does SMOS measure soil moisture?",
     "SMOS measures soil moisture with a C-band passive radiometer operating at 5.4 GHz.",
     [("C-band", 1.0), ("5.4 GHz", 1.0)], None),
    ("What is the swath of the Sentinel-1 IW mode?",
     "Sentinel-1's Interferometric Wide swath mode covers a 400 km swath at 5 m × 20 m resolution and is the "
     "main acquisition mode over land.",
     [("400 km", 1.0)], None),
    ("What does Landsat 8 band 10 measure?",
     "Landsat 8 band 10 is a cirrus band centred at 1.37 µm, acquired by the OLI instrument.",
     [("a cirrus band centred at 1.37 µm", 1.0), ("OLI", 0.9)], None),
    ("Where does Earth's thermal emission peak?",
     "The main thermal infrared atmospheric window lies between about 8 and 14 µm, and Earth's emission "
     "peaks near 0.5 µm according to Wien's law.",
     [("0.5 µm", 1.0)], None),
]


def locate(answer: str, sub: str) -> tuple[int, int]:
    """Offsets of the single occurrence of `sub` in `answer` (end exclusive)."""
    assert answer.count(sub) == 1, f"{sub!r} must occur exactly once in {answer!r}"
    assert sub == sub.strip() and sub, f"span {sub!r} must be non-empty without outer whitespace"
    start = answer.find(sub)
    return start, start + len(sub)


def make_rows() -> list[dict]:
    rows: list[dict] = []
    for question, answer in CORRECT:
        rows.append({"Question": question, "Answer": answer, "Soft labels": [], "Hard labels": [],
                     "is_hallucinated": False})
    for question, answer, false_parts, soft in HALLUCINATED:
        hard = sorted(locate(answer, sub) for sub, _ in false_parts)
        for (s1, e1), (s2, _) in zip(hard, hard[1:]):
            assert e1 <= s2, f"overlapping hard spans in {answer!r}"
        soft_parts = soft if soft is not None else false_parts
        soft_labels = []
        for sub, prob in soft_parts:
            assert 0.0 < prob <= 1.0
            s, e = locate(answer, sub)
            soft_labels.append({"start": s, "end": e, "text": answer[s:e], "prob": prob})
        soft_labels.sort(key=lambda d: d["start"])
        rows.append({"Question": question, "Answer": answer, "Soft labels": soft_labels,
                     "Hard labels": [[s, e] for s, e in hard], "is_hallucinated": True})
    # Interleave correct and hallucinated rows deterministically so that `limit=N` runs see both kinds.
    correct = [r for r in rows if not r["is_hallucinated"]]
    halluc = [r for r in rows if r["is_hallucinated"]]
    mixed: list[dict] = []
    for i in range(max(len(correct), len(halluc))):
        if i < len(halluc):
            mixed.append(halluc[i])
        if i < len(correct):
            mixed.append(correct[i])
    questions = [r["Question"] for r in mixed]
    assert len(set(questions)) == len(questions), "duplicate question"
    return mixed


def main() -> None:
    rows = make_rows()
    with OUT.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    n_h = sum(r["is_hallucinated"] for r in rows)
    print(f"hallucination_detection: {len(rows)} rows, {n_h} hallucinated ({n_h / len(rows):.0%}), "
          f"{sum(len(r['Hard labels']) for r in rows)} hard spans")


if __name__ == "__main__":
    main()
