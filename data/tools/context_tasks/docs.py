"""Hand-written EO paragraphs (data-B). key -> (source, file_path, text)."""

H = "(summary written for evekit)"
T = "(written for evekit)"

DOCS = {
    "S2_MSI": (
        f"Sentinel-2 User Handbook, MSI instrument {H}",
        "docs/sentinel2_handbook.md",
        "The Multispectral Instrument (MSI) on board each Sentinel-2 satellite is a push-broom imager "
        "that samples 13 spectral bands from the visible and near infrared to the short-wave infrared. "
        "Four bands are acquired at 10 m spatial resolution: B2 (blue), B3 (green), B4 (red) and B8 "
        "(near infrared). Six bands are acquired at 20 m: the three red-edge bands B5, B6 and B7, the "
        "narrow near-infrared band B8A, and the two short-wave infrared bands B11 and B12. The remaining "
        "three bands, B1 (coastal aerosol), B9 (water vapour) and B10 (cirrus), are acquired at 60 m and "
        "mainly support atmospheric correction and cloud screening. The instrument covers a swath of 290 km.",
    ),
    "S2_ORBIT": (
        f"Sentinel-2 User Handbook, orbit and coverage {H}",
        "docs/sentinel2_handbook.md",
        "The Sentinel-2 mission was designed as a constellation of two identical satellites, Sentinel-2A "
        "and Sentinel-2B, flying in the same sun-synchronous orbit at a mean altitude of 786 km and phased "
        "180 degrees apart. The mean local solar time at the descending node is 10:30, a choice that "
        "balances low cloud cover in the morning against adequate solar illumination. Each satellite alone "
        "revisits a given point at the equator every 10 days; with both satellites operating, the revisit "
        "at the equator is 5 days, and it is shorter at middle latitudes, where adjacent orbit swaths overlap.",
    ),
    "S2_LEVELS": (
        f"Sentinel-2 Products Specification, processing levels {H}",
        "docs/sentinel2_products.md",
        "Sentinel-2 data are processed in a chain of levels. Level-0 and Level-1A are internal products "
        "holding the raw and decompressed instrument data. Level-1B contains radiometrically corrected "
        "top-of-atmosphere radiances in sensor geometry. Level-1C products are top-of-atmosphere "
        "reflectances that have been orthorectified with a digital elevation model and projected in "
        "UTM/WGS84, delivered as tiles of 100 km by 100 km. Level-2A products provide bottom-of-atmosphere "
        "(surface) reflectance derived from Level-1C, together with a scene classification map and aerosol "
        "and water vapour maps. Level-1C and Level-2A are the levels routinely distributed to users.",
    ),
    "SEN2COR": (
        f"Sen2Cor processor overview {H}",
        "docs/sen2cor_overview.md",
        "Sen2Cor is the processor provided by ESA to generate Sentinel-2 Level-2A products from Level-1C "
        "input. Its main task is atmospheric correction: it converts top-of-atmosphere reflectance into "
        "bottom-of-atmosphere reflectance by estimating the aerosol optical thickness and the atmospheric "
        "water vapour content and removing their effects, optionally together with terrain and cirrus "
        "corrections. As a by-product it delivers a Scene Classification (SCL) layer that labels each pixel "
        "with classes such as vegetation, bare soil, water, cloud shadow, medium- and high-probability "
        "cloud, thin cirrus and snow. The SCL layer is widely used to mask clouds before computing time "
        "series of vegetation indices.",
    ),
    "DOS": (
        f"Optical remote sensing lecture notes, image-based atmospheric correction {T}",
        "docs/notes/atmospheric_correction.md",
        "Dark object subtraction (DOS) is one of the simplest image-based atmospheric correction methods. "
        "It assumes that some pixels in a scene, such as deep clear water or dense shadow, should have a "
        "surface reflectance close to zero. Any signal recorded over these dark objects is therefore "
        "attributed to atmospheric path radiance, mostly caused by scattering, which adds a roughly "
        "constant haze term to the whole band. The method finds the minimum (or a low percentile) value in "
        "each band and subtracts it from every pixel. DOS needs no ancillary atmospheric measurements, but "
        "it only corrects the additive scattering component and ignores atmospheric transmittance losses.",
    ),
    "ATMOS": (
        f"Optical remote sensing lecture notes, atmospheric effects {T}",
        "docs/notes/atmospheric_correction.md",
        "On its way from the Sun to the surface and back to the sensor, radiation is modified by the "
        "atmosphere. Molecules scatter short wavelengths much more strongly than long ones: Rayleigh "
        "scattering is inversely proportional to the fourth power of the wavelength, which is why the blue "
        "bands of an optical image look hazier than the near-infrared bands. Aerosols such as dust, smoke "
        "and sea salt cause Mie scattering, which depends less strongly on wavelength. Gases absorb "
        "radiation in specific bands: water vapour absorbs strongly near 940 nm and 1380 nm, and ozone "
        "absorbs in the ultraviolet and, more weakly, in the visible. Atmospheric correction removes these "
        "effects to retrieve surface reflectance.",
    ),
    "RAD_REFL": (
        f"Radiometry primer, radiance and reflectance {T}",
        "docs/notes/radiometry.md",
        "Spectral radiance is the quantity an optical sensor actually measures: the radiant flux per unit "
        "area, per unit solid angle and per unit wavelength, usually expressed in W m-2 sr-1 µm-1. Radiance "
        "depends on the illumination, so the same field looks brighter at noon in summer than in winter. "
        "Reflectance removes this dependence by dividing the reflected flux by the incident flux; it is "
        "dimensionless and typically between 0 and 1. Top-of-atmosphere reflectance is computed as "
        "rho = pi * L * d^2 / (ESUN * cos(theta_s)), where L is the radiance, d the Earth-Sun distance in "
        "astronomical units, ESUN the mean exoatmospheric solar irradiance in the band and theta_s the "
        "solar zenith angle.",
    ),
    "BT": (
        f"Radiometry primer, thermal emission {T}",
        "docs/notes/radiometry.md",
        "Thermal infrared sensors record radiance emitted by the surface and the atmosphere. This radiance "
        "is commonly converted into brightness temperature, the temperature a perfect blackbody would need "
        "in order to emit the same radiance at the sensor's wavelength; the conversion inverts Planck's "
        "law. Brightness temperature is not the same as the physical (kinetic) temperature of the surface. "
        "Real surfaces have an emissivity below 1, so they emit less than a blackbody at the same "
        "temperature, and the atmosphere absorbs and re-emits radiation between surface and sensor. "
        "Retrieving land surface temperature therefore requires both an emissivity estimate and an "
        "atmospheric correction.",
    ),
    "TIR_SPLIT": (
        f"Thermal remote sensing notes, split-window methods {T}",
        "docs/notes/thermal_infrared.md",
        "Most thermal remote sensing of the land and sea surface uses the atmospheric window between about "
        "8 and 14 µm, where the atmosphere is relatively transparent and where the emission of objects at "
        "terrestrial temperatures peaks, near 10 µm. Even inside this window, water vapour absorbs part of "
        "the signal. The split-window technique exploits two adjacent thermal channels, typically centred "
        "near 11 and 12 µm, which are affected differently by water vapour: the difference between their "
        "brightness temperatures is used to estimate and remove the atmospheric effect. The method is used "
        "operationally for sea surface temperature and land surface temperature retrievals.",
    ),
    "LANDSAT89": (
        f"Landsat 8-9 mission overview {H}",
        "docs/landsat89_overview.md",
        "Landsat 8, launched in February 2013, and Landsat 9, launched in September 2021, each carry two "
        "instruments. The Operational Land Imager (OLI, and OLI-2 on Landsat 9) collects nine spectral "
        "bands: eight multispectral bands at 30 m resolution, including a coastal/aerosol band and a cirrus "
        "band, and a panchromatic band at 15 m. The Thermal Infrared Sensor (TIRS, and TIRS-2) collects two "
        "thermal bands near 10.9 and 12.0 µm at 100 m resolution. Both satellites fly in a sun-synchronous "
        "orbit at 705 km altitude with a 16-day repeat cycle each; offset by eight days, together they image "
        "any location every eight days. The imaging swath is about 185 km wide.",
    ),
    "LANDSAT_C2": (
        f"Landsat Collection 2 product guide {H}",
        "docs/landsat_collection2.md",
        "Landsat Collection 2 is the USGS reprocessing of the Landsat archive. Level-1 products contain "
        "calibrated digital numbers that can be rescaled to top-of-atmosphere reflectance and radiance with "
        "coefficients supplied in the metadata. Level-2 Science Products add surface reflectance and "
        "surface temperature. Surface reflectance for Landsat 8 and 9 is produced with the Land Surface "
        "Reflectance Code (LaSRC), while the Landsat 4-7 archive is processed with LEDAPS. Surface "
        "temperature is derived from a thermal band with a single-channel algorithm that takes emissivity "
        "from the ASTER Global Emissivity Database. Each product also includes a pixel quality band that "
        "flags clouds, cloud shadow, snow and water.",
    ),
    "MODIS": (
        f"MODIS instrument overview {H}",
        "docs/modis_overview.md",
        "The Moderate Resolution Imaging Spectroradiometer (MODIS) flies on two NASA satellites: Terra, "
        "launched in December 1999, crosses the equator in the morning, and Aqua, launched in May 2002, "
        "crosses in the afternoon. MODIS measures 36 spectral bands between 0.4 and 14.4 µm. Bands 1 and 2 "
        "(red and near infrared) have a resolution of 250 m, bands 3 to 7 have 500 m and bands 8 to 36 have "
        "1 km. With a swath of about 2330 km, each instrument views the entire Earth surface every one to "
        "two days. Products from Terra carry the prefix MOD and those from Aqua the prefix MYD, for example "
        "MOD13Q1, a 16-day 250 m vegetation index composite.",
    ),
    "S1_SAR": (
        f"Sentinel-1 User Handbook, SAR instrument and modes {H}",
        "docs/sentinel1_handbook.md",
        "Sentinel-1 carries a C-band synthetic aperture radar operating at a centre frequency of 5.405 GHz. "
        "As an active microwave sensor it provides its own illumination, so it acquires images day and "
        "night and through cloud cover. The primary acquisition mode over land is Interferometric Wide "
        "swath (IW), which uses the TOPSAR technique to cover a 250 km swath at about 5 m by 20 m (range by "
        "azimuth) single-look resolution. Other modes are Stripmap, Extra Wide swath, with a 400 km swath "
        "for maritime and polar monitoring, and Wave mode over the open ocean. The radar can transmit in "
        "horizontal or vertical polarisation and receive in both, giving dual-polarisation products such "
        "as VV+VH or HH+HV.",
    ),
    "S1_ORBIT": (
        f"Sentinel-1 User Handbook, orbit {H}",
        "docs/sentinel1_handbook.md",
        "Sentinel-1 satellites fly in a near-polar sun-synchronous orbit at an altitude of about 693 km "
        "with a repeat cycle of 12 days. When two satellites are operated in the same orbital plane, 180 "
        "degrees apart, the repeat cycle of the constellation becomes 6 days. The orbit is a dawn-dusk "
        "orbit, meaning the satellite crosses the equator near 06:00 and 18:00 local solar time, which "
        "keeps the solar arrays illuminated for most of the orbit. Each location is imaged in ascending and "
        "descending passes, which view the ground from opposite sides and help reduce gaps caused by "
        "layover and shadow in mountainous terrain.",
    ),
    "S1_PRODUCTS": (
        f"Sentinel-1 Product Definition, Level-1 products {H}",
        "docs/sentinel1_products.md",
        "Sentinel-1 Level-1 products come in two main types. Single Look Complex (SLC) products keep the "
        "full complex signal, amplitude and phase, in slant-range geometry at the full resolution of the "
        "acquisition; they are required for interferometry. Ground Range Detected (GRD) products have been "
        "detected, so the phase is discarded, multi-looked to reduce speckle, and projected onto ground "
        "range using an Earth ellipsoid model. GRD pixels are therefore approximately square but have a "
        "coarser resolution than the SLC. Before quantitative use, GRD data are usually calibrated to "
        "backscatter coefficients and terrain-corrected.",
    ),
    "SPECKLE": (
        f"SAR fundamentals course notes, speckle {T}",
        "docs/notes/sar_fundamentals.md",
        "Every SAR image shows speckle, a granular salt-and-pepper pattern. It arises because each "
        "resolution cell contains many elementary scatterers whose echoes add coherently: depending on "
        "their random relative phases they interfere constructively or destructively, so neighbouring "
        "pixels of the same homogeneous field can have very different intensities. Speckle behaves as "
        "multiplicative noise, its strength proportional to the local signal. It can be reduced by "
        "multi-looking, which averages several independent looks at the cost of spatial resolution, or by "
        "adaptive spatial filters such as the Lee, Frost and Gamma-MAP filters, which smooth homogeneous "
        "areas while trying to preserve edges. Averaging a time series of co-registered images also "
        "reduces speckle.",
    ),
    "POL": (
        f"SAR fundamentals course notes, polarisation {T}",
        "docs/notes/sar_fundamentals.md",
        "Radar polarisation describes the orientation of the electric field of the transmitted and "
        "received waves. A channel is named by two letters, first transmit, then receive: HH and VV are "
        "co-polarised channels, while HV and VH are cross-polarised. Surface scattering from smooth or "
        "moderately rough soil mostly preserves the polarisation, so it appears strongly in co-polarised "
        "channels. Volume scattering inside vegetation canopies, where waves bounce between many randomly "
        "oriented leaves and branches, depolarises the signal and increases the cross-polarised return. "
        "For this reason the VH channel of Sentinel-1 is often used to monitor crop growth and forest "
        "cover, and the VH/VV ratio to separate vegetation from bare soil.",
    ),
    "BANDS": (
        f"SAR fundamentals course notes, frequency bands {T}",
        "docs/notes/sar_fundamentals.md",
        "Radar frequency bands are identified by letter codes. X-band operates near 8-12 GHz with a "
        "wavelength of about 3 cm and is used by missions such as TerraSAR-X and COSMO-SkyMed. C-band, near "
        "4-8 GHz (a wavelength of about 5.5 cm at Sentinel-1's 5.405 GHz), is used by Sentinel-1 and RADARSAT. L-band, near 1-2 GHz "
        "with a wavelength of about 23 cm, is used by ALOS-2 PALSAR-2 and by the L-band radar of the NISAR "
        "mission. Longer wavelengths penetrate deeper into vegetation canopies, dry sand and snow, so L-band "
        "interacts with trunks and large branches, whereas X-band mostly senses the top of the canopy and "
        "is more sensitive to small surface details.",
    ),
    "INSAR": (
        f"InSAR tutorial, interferogram formation {T}",
        "docs/notes/insar_tutorial.md",
        "SAR interferometry (InSAR) compares the phase of two complex SAR images acquired from nearly the "
        "same position at different times. After co-registration, the phase difference of each pixel forms "
        "an interferogram. Once contributions from topography, orbit geometry and the atmosphere are "
        "removed, the remaining phase is related to ground displacement along the radar line of sight: a "
        "full phase cycle of 2 pi, one colour fringe in a wrapped interferogram, corresponds to a "
        "displacement of half the radar wavelength. For Sentinel-1 at C-band, with a wavelength of about "
        "5.5 cm, one fringe therefore represents about 2.8 cm of line-of-sight motion. Phase unwrapping "
        "converts the wrapped phase into continuous displacement.",
    ),
    "COHERENCE": (
        f"InSAR tutorial, coherence and decorrelation {T}",
        "docs/notes/insar_tutorial.md",
        "Interferometric coherence measures how similar the scattering in a pixel is between two SAR "
        "acquisitions. It is estimated over a small window from the complex correlation of the two images "
        "and ranges from 0, complete decorrelation, to 1, perfectly stable scattering. Temporal "
        "decorrelation occurs when the scatterers change between acquisitions, for instance through "
        "vegetation growth, wind moving leaves, ploughing or snowfall. Geometric decorrelation grows with "
        "the perpendicular baseline between the two orbits, and volume decorrelation occurs in vegetation "
        "canopies. Urban areas and bare rock typically keep high coherence over long intervals, whereas "
        "forests at C-band lose coherence quickly. Low-coherence pixels give unreliable phase and are "
        "usually masked.",
    ),
    "PSINSAR": (
        f"InSAR tutorial, persistent scatterers {T}",
        "docs/notes/insar_tutorial.md",
        "Persistent Scatterer Interferometry (PSI or PS-InSAR) analyses long stacks of SAR images, "
        "typically tens of acquisitions, to find pixels dominated by a single, stable, strongly reflecting "
        "object such as a building corner, a metal structure or exposed rock. These persistent scatterers "
        "keep a consistent phase over time even when the surrounding area decorrelates. By modelling the "
        "phase history of each scatterer, the method separates atmospheric delay and residual topography "
        "from displacement and estimates deformation velocities and time series with millimetre-level "
        "precision. PSI is widely used to monitor subsidence in cities, the stability of infrastructure "
        "such as bridges and dams, and landslides.",
    ),
    "GEOMDIST": (
        f"SAR fundamentals course notes, geometric distortions {T}",
        "docs/notes/sar_fundamentals.md",
        "Because a SAR measures the distance to targets and looks sideways, terrain produces characteristic "
        "geometric distortions. Foreshortening compresses slopes that face the radar, so they appear "
        "shorter and brighter than they are. When a slope facing the radar is steeper than the incidence "
        "angle, the top of the slope is closer to the sensor than its base and is imaged before it; this "
        "inversion is called layover and is common on mountains and tall buildings. Slopes facing away "
        "from the radar that are steeper than the complement of the incidence angle are not illuminated at "
        "all and appear as dark radar shadow. Layover is worse at small incidence angles, shadow at large "
        "incidence angles.",
    ),
    "BACKSCATTER_WATER": (
        f"SAR applications notes, water and soil moisture {T}",
        "docs/notes/sar_applications.md",
        "The strength of the radar echo, or backscatter, depends on surface roughness relative to the "
        "wavelength, on geometry and on the dielectric properties of the target. Calm open water behaves "
        "like a mirror: it reflects the radar pulse away from the sensor (specular reflection), so it "
        "appears very dark in SAR images. This contrast makes SAR a standard tool for mapping floods, often "
        "by thresholding the VV backscatter. Wind-roughened water returns more energy and can be confused "
        "with land. Moist soil has a higher dielectric constant than dry soil and therefore produces "
        "stronger backscatter, which is the basis of SAR soil moisture retrieval. Flooded forests and "
        "flooded urban areas can instead appear bright because of double-bounce scattering between the "
        "water surface and trunks or walls.",
    ),
    "CALIB": (
        f"SAR calibration notes, backscatter normalisation {T}",
        "docs/notes/sar_calibration.md",
        "Calibrated SAR backscatter is expressed with one of three normalisations. Beta nought is the radar "
        "brightness per unit area in the slant-range plane and does not require knowledge of the terrain. "
        "Sigma nought is the backscatter coefficient per unit area on the ground; over an ellipsoid it "
        "equals beta nought multiplied by the sine of the incidence angle. Gamma nought normalises by the "
        "area projected perpendicular to the look direction and equals sigma nought divided by the cosine "
        "of the incidence angle, which reduces the dependence of the signal on incidence angle across the "
        "swath. Radiometric terrain flattening computes gamma nought with a digital elevation model so that "
        "slopes facing towards or away from the sensor can be compared.",
    ),
    "GEDI": (
        f"GEDI mission overview {H}",
        "docs/gedi_overview.md",
        "The Global Ecosystem Dynamics Investigation (GEDI) is a full-waveform lidar installed on the "
        "International Space Station in December 2018. It uses lasers at 1064 nm and records the full "
        "return waveform from footprints about 25 m in diameter. Within a footprint the waveform shows the "
        "energy reflected from leaves and branches at each height and, at the bottom, from the ground, "
        "which allows the retrieval of canopy height, vertical canopy structure and, through models, "
        "above-ground biomass. Because of the station's orbit, GEDI samples the Earth only between about "
        "51.6 degrees north and south, covering tropical and temperate forests but not most of the boreal "
        "zone. GEDI collects samples along tracks rather than a continuous image.",
    ),
    "ICESAT2": (
        f"ICESat-2 mission overview {H}",
        "docs/icesat2_overview.md",
        "ICESat-2, launched by NASA in September 2018, carries the Advanced Topographic Laser Altimeter "
        "System (ATLAS). Unlike earlier waveform lidars, ATLAS is a photon-counting instrument: it fires "
        "green laser pulses at 532 nm at a rate of 10 kHz and records the travel time of individual "
        "returning photons. The beam is split into six beams arranged in three pairs, each pair made of a "
        "strong and a weak beam, which helps to measure surface slope across track. The high pulse rate "
        "gives dense sampling along track, about every 0.7 m. The mission's main goals are measuring "
        "changes in ice-sheet elevation, sea-ice freeboard and thickness, and vegetation height.",
    ),
    "LIDAR_DTM": (
        f"Airborne laser scanning primer {T}",
        "docs/notes/lidar_primer.md",
        "Airborne laser scanning records, for each emitted pulse, one or several returns. In vegetated "
        "areas the first return often comes from the top of the canopy and the last return from the ground "
        "beneath it. After classifying the point cloud into ground and non-ground points, two raster "
        "surfaces are usually produced: a digital terrain model (DTM), interpolated from ground points "
        "only, and a digital surface model (DSM), built from the highest returns and therefore including "
        "buildings and trees. Subtracting the DTM from the DSM gives a normalised surface model; over "
        "forests this difference is called the canopy height model (CHM) and is the basis for estimating "
        "tree height and biomass.",
    ),
    "SSO": (
        f"Orbits for Earth observation, lecture notes {T}",
        "docs/notes/orbits.md",
        "A sun-synchronous orbit is a near-polar orbit whose plane rotates eastward by about 0.986 degrees "
        "per day, the same angle through which the Earth moves around the Sun each day. The rotation is "
        "driven by the Earth's equatorial bulge (the J2 term of the gravity field), and for altitudes of "
        "several hundred kilometres it requires a slightly retrograde inclination of about 97 to 99 "
        "degrees. As a result the satellite crosses the equator at the same local solar time on every "
        "orbit. Constant local time gives similar illumination conditions from one acquisition to the "
        "next, which simplifies the comparison of images over time.",
    ),
    "GEO": (
        f"Orbits for Earth observation, lecture notes {T}",
        "docs/notes/orbits.md",
        "A geostationary satellite orbits above the equator at an altitude of about 35,786 km, where its "
        "orbital period equals one sidereal day. It therefore remains fixed above one point of the equator "
        "and sees the same disk of the Earth continuously. Weather satellites such as Meteosat, GOES and "
        "Himawari use this orbit to image a full disk every 10 to 15 minutes, which allows clouds and storms to "
        "be tracked as they develop. The price of the great distance is a coarser spatial resolution than "
        "that of low Earth orbit imagers, and high latitudes are seen at very oblique angles, so polar "
        "regions are poorly observed.",
    ),
    "REVISIT": (
        f"Orbits for Earth observation, lecture notes {T}",
        "docs/notes/orbits.md",
        "Two timing terms are often confused. The repeat cycle is the time after which a satellite returns "
        "to exactly the same ground track and views a location with identical geometry; for Landsat 8 it "
        "is 16 days. The revisit time is the interval between successive observations of a location, "
        "possibly from different tracks and viewing angles. Revisit can be shorter than the repeat cycle "
        "because adjacent swaths overlap, especially at high latitudes, because the sensor can be pointed "
        "off-nadir, or because several satellites form a constellation. Temporal resolution generally "
        "trades off against spatial resolution: wide-swath sensors such as MODIS see the whole globe daily "
        "at hundreds of metres, while metre-scale imagers cover small areas.",
    ),
    "RESOLUTIONS": (
        f"Remote sensing fundamentals, sensor resolutions {T}",
        "docs/notes/fundamentals.md",
        "Remote sensing images are characterised by four kinds of resolution. Spatial resolution is the "
        "size of the smallest ground area resolved, often approximated by the pixel size or ground sampling "
        "distance. Spectral resolution describes the number, width and position of the wavelength bands. "
        "Radiometric resolution is the sensor's ability to distinguish small differences in signal, "
        "expressed as the number of bits used to quantise it: 8 bits give 256 levels and 12 bits give 4096. "
        "Temporal resolution is how often the same area is observed. Sentinel-2 MSI quantises its data with "
        "12 bits, and Landsat 9 OLI-2 with 14 bits, an improvement over the 12 bits of Landsat 8 OLI.",
    ),
    "NDVI": (
        f"Spectral indices handbook, vegetation {T}",
        "docs/notes/spectral_indices.md",
        "The Normalized Difference Vegetation Index (NDVI) exploits the contrast between the red and "
        "near-infrared reflectance of green vegetation. Chlorophyll absorbs strongly in the red, while the "
        "internal leaf structure scatters near-infrared light, so healthy vegetation is dark in the red and "
        "bright in the near infrared. NDVI is computed as (NIR - Red) / (NIR + Red) and ranges from -1 to "
        "+1. Dense green vegetation gives high positive values, bare soil low positive values, and water "
        "usually negative values. For Sentinel-2, NDVI is usually computed from bands B8 and B4, both at "
        "10 m; for Landsat 8 and 9 from OLI bands 5 and 4.",
    ),
    "EVI": (
        f"Spectral indices handbook, enhanced vegetation index {T}",
        "docs/notes/spectral_indices.md",
        "The Enhanced Vegetation Index (EVI) was designed to improve on NDVI over dense vegetation, where "
        "NDVI tends to saturate, and to reduce the influence of soil background and atmosphere. It uses the "
        "blue band in addition to red and near infrared: EVI = G * (NIR - Red) / (NIR + C1 * Red - C2 * "
        "Blue + L), with the coefficients adopted for MODIS being G = 2.5, C1 = 6, C2 = 7.5 and L = 1. The "
        "blue band corrects for aerosol influences in the red band, and L adjusts for canopy background. "
        "EVI is distributed together with NDVI in the MODIS vegetation index products such as MOD13Q1.",
    ),
    "NDWI": (
        f"Spectral indices handbook, water indices {T}",
        "docs/notes/spectral_indices.md",
        "Two different indices share the name Normalized Difference Water Index. The version proposed by "
        "McFeeters in 1996 uses the green and near-infrared bands, NDWI = (Green - NIR) / (Green + NIR), to "
        "delineate open water: water reflects more green than near-infrared light, so water bodies have "
        "positive values while vegetation and soil are mostly negative. The version proposed by Gao in the "
        "same year uses near-infrared and short-wave infrared, (NIR - SWIR) / (NIR + SWIR), and responds to "
        "the liquid water content of vegetation canopies rather than to open water. A modified index "
        "(MNDWI) replaces the near-infrared band of McFeeters' formula with a short-wave infrared band to "
        "better suppress built-up areas.",
    ),
    "NBR": (
        f"Spectral indices handbook, burned areas {T}",
        "docs/notes/spectral_indices.md",
        "The Normalized Burn Ratio (NBR) is used to map burned areas and estimate burn severity. Healthy "
        "vegetation reflects strongly in the near infrared and weakly in the short-wave infrared, whereas "
        "recently burned areas show low near-infrared and higher short-wave infrared reflectance. NBR is "
        "computed as (NIR - SWIR2) / (NIR + SWIR2), using for example Landsat 8 OLI bands 5 and 7 or "
        "Sentinel-2 bands B8A (or B8) and B12. Burn severity is usually assessed with the differenced NBR, "
        "dNBR = NBR(pre-fire) - NBR(post-fire): larger positive values indicate more severe burns, while "
        "negative values can indicate vegetation regrowth.",
    ),
    "NDSI": (
        f"Spectral indices handbook, snow {T}",
        "docs/notes/spectral_indices.md",
        "Snow is very bright in the visible part of the spectrum but absorbs strongly in the short-wave "
        "infrared near 1.6 µm, whereas most clouds remain bright at that wavelength. The Normalized "
        "Difference Snow Index exploits this contrast: NDSI = (Green - SWIR) / (Green + SWIR). Snow-covered "
        "pixels have high positive values, and a threshold around 0.4 has traditionally been used in MODIS "
        "snow mapping. For Sentinel-2 the index is computed from bands B3 and B11, and for MODIS from bands "
        "4 and 6. Because water can also have a high NDSI, snow algorithms add a near-infrared reflectance "
        "test or a water mask.",
    ),
    "S3": (
        f"Sentinel-3 User Handbook, payload {H}",
        "docs/sentinel3_handbook.md",
        "Sentinel-3 is a multi-instrument mission for ocean, land, atmosphere and cryosphere monitoring. "
        "The Ocean and Land Colour Instrument (OLCI) measures 21 spectral bands between 400 and 1020 nm at "
        "300 m resolution over a 1270 km swath, continuing the heritage of Envisat's MERIS. The Sea and Land "
        "Surface Temperature Radiometer (SLSTR) provides visible, short-wave infrared and thermal infrared "
        "channels with a dual view, nadir and oblique, that improves the atmospheric correction of "
        "temperature retrievals. The topography package includes the SAR Radar Altimeter (SRAL), operating "
        "in Ku and C band, and a microwave radiometer for the wet-troposphere correction, supporting "
        "measurements of sea surface height, significant wave height and wind speed.",
    ),
    "S5P": (
        f"Sentinel-5 Precursor mission overview {H}",
        "docs/sentinel5p_overview.md",
        "Sentinel-5 Precursor, launched in October 2017, is the first Copernicus mission dedicated to "
        "monitoring the atmosphere. Its single instrument, TROPOMI (TROPOspheric Monitoring Instrument), is "
        "a push-broom imaging spectrometer covering the ultraviolet, visible, near-infrared and short-wave "
        "infrared. From these spectra the mission retrieves columns of trace gases including nitrogen "
        "dioxide, ozone, sulphur dioxide, formaldehyde, carbon monoxide and methane, as well as aerosol and "
        "cloud properties. With a swath of about 2600 km it covers the globe daily, and its ground pixels "
        "(initially 7 km by 3.5 km, reduced to 5.5 km by 3.5 km in August 2019) are much smaller than "
        "those of its predecessors.",
    ),
    "S6": (
        f"Sentinel-6 Michael Freilich mission overview {H}",
        "docs/sentinel6_overview.md",
        "Sentinel-6 Michael Freilich, launched in November 2020, is the reference mission for measuring "
        "global mean sea level, continuing the record begun by TOPEX/Poseidon in 1992 and continued by the "
        "Jason satellites. Its main instrument is the Poseidon-4 radar altimeter, which operates in Ku and "
        "C band and can combine conventional low-resolution and SAR (delay-Doppler) processing. Unlike most "
        "Earth observation satellites, Sentinel-6 does not fly in a sun-synchronous orbit: it uses an orbit "
        "at 1336 km with an inclination of 66 degrees and a repeat cycle of about 10 days, on the same "
        "ground track as its predecessors. A microwave radiometer corrects for the signal delay caused by "
        "water vapour.",
    ),
    "COPERNICUS": (
        f"Copernicus programme overview {H}",
        "docs/copernicus_overview.md",
        "Copernicus is the Earth observation component of the European Union's space programme. Data from "
        "the Sentinel satellites and contributing missions, together with in situ measurements, feed six "
        "thematic services: the Atmosphere Monitoring Service (CAMS), the Marine Environment Monitoring "
        "Service (CMEMS), the Land Monitoring Service (CLMS), the Climate Change Service (C3S), the "
        "Emergency Management Service (CEMS) and the Security service. ECMWF implements CAMS and C3S, and "
        "Mercator Ocean International implements the marine service. The Emergency Management Service "
        "includes rapid mapping, which provides damage and flood maps within hours or days after a "
        "disaster. Data and information are provided on a free, full and open basis.",
    ),
    "CDSE": (
        f"Copernicus Data Space Ecosystem, user guide {H}",
        "docs/cdse_user_guide.md",
        "Sentinel data can be discovered and downloaded through the Copernicus Data Space Ecosystem, which "
        "in 2023 replaced the Copernicus Open Access Hub. The ecosystem offers a browser for visual search, "
        "catalogue interfaces based on OData and STAC, and on-line processing services so that users can "
        "analyse data without downloading entire products. Sentinel-2 products are delivered in the SAFE "
        "format, a folder containing the image data as JPEG2000 files per band, together with XML metadata "
        "and quality information. Level-1C and Level-2A products are organised in 100 km by 100 km tiles "
        "identified by five-character codes of the Military Grid Reference System (MGRS).",
    ),
    "CORINE": (
        f"Copernicus Land Monitoring Service, CORINE Land Cover {H}",
        "docs/clms_corine.md",
        "CORINE Land Cover is a pan-European land cover and land use inventory coordinated by the European "
        "Environment Agency within the Copernicus Land Monitoring Service. It uses a nomenclature of 44 "
        "classes organised in three hierarchical levels, and the minimum mapping unit of the status layers "
        "is 25 hectares, with a minimum width of 100 m for linear features. Change layers record land cover "
        "changes with a smaller minimum mapping unit of 5 hectares. The inventory was first produced for "
        "the reference year 1990 and has been updated for 2000, 2006, 2012 and 2018, which allows "
        "long-term analysis of urban growth, agricultural change and forest dynamics across the "
        "participating countries.",
    ),
    "HYPER": (
        f"Imaging spectroscopy primer {T}",
        "docs/notes/hyperspectral.md",
        "Hyperspectral, or imaging spectroscopy, sensors record hundreds of narrow, contiguous spectral "
        "bands, typically about 10 nm wide, instead of the handful of broad bands of multispectral sensors. "
        "Each pixel therefore yields a nearly continuous reflectance spectrum in which absorption features "
        "of minerals, pigments, water and other materials can be identified. Examples are NASA's Hyperion "
        "on EO-1, with 220 bands at 30 m; the Italian PRISMA mission, launched in 2019, which pairs a 30 m "
        "hyperspectral imager with a 5 m panchromatic camera; and the German EnMAP, launched in 2022, which "
        "covers about 420 to 2450 nm at 30 m over a 30 km swath. The large data volume and strong band "
        "correlation often call for dimensionality reduction.",
    ),
    "UNMIX": (
        f"Imaging spectroscopy primer, spectral unmixing {T}",
        "docs/notes/hyperspectral.md",
        "The pixels of moderate-resolution images often contain several materials, for example a mix of "
        "grass, soil and a road. Such mixed pixels are common at the boundaries between land cover types "
        "and wherever features are smaller than the pixel. Linear spectral unmixing models the spectrum of "
        "a pixel as a weighted sum of the spectra of pure materials, called endmembers, with the weights "
        "representing the fraction of the pixel covered by each material. The abundances are usually "
        "constrained to be non-negative and to sum to one. Endmembers can come from spectral libraries, "
        "field measurements or the purest pixels of the image itself.",
    ),
    "PANSHARP": (
        f"Image fusion notes, pan-sharpening {T}",
        "docs/notes/image_fusion.md",
        "Many optical sensors acquire a panchromatic band with finer spatial resolution than their "
        "multispectral bands, because a broad band collects more energy, so smaller detector footprints "
        "still give an adequate signal-to-noise ratio. Pan-sharpening fuses the two: it injects the spatial "
        "detail of the panchromatic band into the multispectral bands to produce a colour image at the "
        "panchromatic resolution. On Landsat 8 and 9 the 15 m panchromatic band can sharpen the 30 m "
        "multispectral bands. Common methods include the intensity-hue-saturation (IHS) transform, the "
        "Brovey transform, Gram-Schmidt and wavelet-based approaches. Pan-sharpened products are good for "
        "visual interpretation, but they can distort spectral values.",
    ),
    "SMOS": (
        f"Passive microwave remote sensing notes {T}",
        "docs/notes/passive_microwave.md",
        "Passive microwave radiometers measure the natural microwave emission of the surface, expressed as "
        "brightness temperature. At L-band, around 1.4 GHz, this emission is strongly influenced by soil "
        "moisture over land and by salinity over the ocean, and the atmosphere is almost transparent. ESA's "
        "SMOS mission, launched in 2009, carries MIRAS, a Y-shaped interferometric radiometer carrying 69 "
        "small receivers on its central hub and three arms; combining their signals synthesises a large antenna aperture "
        "without a large dish. NASA's SMAP mission, launched in 2015, also measures L-band emission; its "
        "companion radar stopped working a few months after launch. Passive microwave soil moisture "
        "products have coarse resolution, of the order of tens of kilometres.",
    ),
    "PASSIVE_ACTIVE": (
        f"Remote sensing fundamentals, passive and active sensors {T}",
        "docs/notes/fundamentals.md",
        "Remote sensing instruments are divided into passive and active sensors. Passive sensors, such as "
        "multispectral cameras and thermal radiometers, measure radiation that originates elsewhere: "
        "reflected sunlight in the visible and short-wave infrared, or radiation emitted by the surface "
        "itself in the thermal infrared and microwave. Reflective optical sensors therefore need daylight, "
        "and their view of the surface is blocked by clouds. Active sensors transmit their own signal and "
        "measure its return; radar and lidar are the main examples. Because microwaves pass through clouds "
        "with little attenuation, imaging radars can observe the surface in any weather and at night, a "
        "decisive advantage in cloudy tropical regions and during storms and floods.",
    ),
    "RED_EDGE": (
        f"Spectral indices handbook, red edge {T}",
        "docs/notes/spectral_indices.md",
        "The red edge is the steep rise in vegetation reflectance between about 680 and 750 nm, from strong "
        "chlorophyll absorption in the red to high scattering in the near infrared. The position of its "
        "inflection point shifts to longer wavelengths as chlorophyll content increases and shifts back "
        "when plants are stressed or senescent. Sentinel-2 MSI has three bands in this region, B5, B6 and "
        "B7, centred near 705, 740 and 783 nm at 20 m resolution. Indices built on these bands, such as the "
        "normalised difference red-edge index, are used to estimate leaf chlorophyll and nitrogen content "
        "in crops.",
    ),
    "PROC_LEVELS": (
        f"Data processing levels, EO glossary {T}",
        "docs/notes/processing_levels.md",
        "Satellite data products are commonly described with processing levels defined by NASA and used "
        "widely across agencies. Level 0 is reconstructed, unprocessed instrument data at full resolution, "
        "with communication artefacts removed. Level 1A adds time references and the radiometric and "
        "geometric calibration coefficients without applying them; Level 1B applies them, giving "
        "calibrated sensor units such as radiance. Level 2 products contain derived geophysical variables, "
        "such as surface reflectance or sea surface temperature, at the same resolution and location as "
        "the Level 1 data. Level 3 products map variables onto uniform space-time grids, often with "
        "compositing or gap filling, and Level 4 products come from models or analyses of lower-level data.",
    ),
}
