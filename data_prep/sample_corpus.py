"""Generate a small, realistic, entirely synthetic MediaWiki XML dump.

The project may not ship any Wikipedia text, yet its quickstart and its tests need a
corpus that looks and behaves like a real ``enwiki``/``zhwiki`` pages-articles dump.
This module *generates* one: fictional rivers, towns, people, species, inventions,
organizations and battles, written from word lists and sentence templates, wrapped
in the markup a wikitext cleaner has to cope with (infoboxes, ``{{convert}}``,
``<ref>`` with citation templates, piped links, ``[[File:...]]`` with nested links,
tables, lists, comments, HTML tags, entities, categories, trailing sections ...).

The XML follows schema export-0.10: ``<siteinfo>`` with ``<namespaces>``, then one
``<page>`` per page (ordered by page id, namespaces mixed, as in a real dump) with
``<title>``, ``<ns>``, ``<id>``, an optional ``<redirect title="..." />`` and a
``<revision>`` holding ``<text xml:space="preserve">``.

Besides ``num_articles`` ordinary articles (namespace 0) every dump contains:

* one empty article and one single-sentence stub article (namespace 0);
* one disambiguation page (namespace 0) listing articles that share a name;
* :func:`num_redirects` redirect pages (namespace 0, ``#REDIRECT [[X]]``);
* :data:`OTHER_NAMESPACE_PAGES` pages in Talk, User, Wikipedia, File, Template
  and Category namespaces.

Output is a pure function of the arguments (``random.Random(seed)``, timestamps
drawn from a fixed range), so the same call always gives byte-identical text.

Command line::

    python -m data_prep.sample_corpus OUT_PATH [--articles N] [--seed S] [--language en|zh]
"""

from __future__ import annotations

import argparse
import bz2
import datetime as _dt
import hashlib
import os
import pathlib
import random
import re
import sys
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

__all__ = [
    "LANGUAGES",
    "OTHER_NAMESPACE_PAGES",
    "generate_wiki_xml",
    "main",
    "num_redirects",
    "write_sample_dump",
]

LANGUAGES = ("en", "zh")

# How many pages each non-article namespace gets (namespace key -> count).
OTHER_NAMESPACE_PAGES: dict[int, int] = {1: 2, 2: 2, 4: 1, 6: 1, 10: 2, 14: 2}

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.10/"

# Hand-aligned data tables below are kept out of the formatter.
# fmt: off

# Namespace table of a current Wikipedia dump. zhwiki lists the same canonical
# (English) names in its <siteinfo>, so both languages share it.
_NAMESPACES: list[tuple[int, str]] = [
    (-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"),
    (3, "User talk"), (4, "Wikipedia"), (5, "Wikipedia talk"), (6, "File"),
    (7, "File talk"), (8, "MediaWiki"), (9, "MediaWiki talk"), (10, "Template"),
    (11, "Template talk"), (12, "Help"), (13, "Help talk"), (14, "Category"),
    (15, "Category talk"), (100, "Portal"), (101, "Portal talk"), (118, "Draft"),
    (119, "Draft talk"), (710, "TimedText"), (711, "TimedText talk"),
    (828, "Module"), (829, "Module talk"),
]

# Article kinds, their weight when drawn at random, and the template group they
# share sentences with ("geo" sentences suit rivers, lakes, mountains and towns).
_KIND_WEIGHTS = {
    "settlement": 3, "river": 2, "person": 3, "lake": 1, "mountain": 1,
    "species": 2, "invention": 1, "organization": 1, "battle": 1,
}
_KIND_GROUP = {
    "settlement": "geo", "river": "geo", "lake": "geo", "mountain": "geo",
    "person": "bio", "species": "thing", "invention": "thing",
    "organization": "thing", "battle": "event",
}

# fmt: on

# Sentence-count bounds for one ordinary article (lead plus body sections).
_MIN_SENTENCES, _MAX_SENTENCES = 15, 60

# A placeholder is ``{key}``; the look-behind leaves wiki templates and template
# parameters (``{{reflist}}``, ``{{{name|}}}``) alone.
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z][A-Za-z_]*[0-9]*)\}")


def num_redirects(num_articles: int) -> int:
    """Number of redirect pages in a dump with ``num_articles`` articles."""
    return 3 + num_articles // 20


# ---------------------------------------------------------------------------
# English data
# ---------------------------------------------------------------------------

# fmt: off
_EN: dict = {
    "code": "en",
    "dbname": "enwiki",
    "base": "https://en.wikipedia.org/wiki/Main_Page",
    "joiner": " ",
    "onsets": [
        "Var", "El", "Tol", "Os", "Kest", "Dra", "Nor", "Bel", "Cor", "Fen", "Hal",
        "Mar", "Ros", "Tam", "Wil", "Ash", "Brin", "Cal", "Dun", "Gar", "Lin", "Mor",
        "Pen", "Sel", "Tarn", "Ul", "Wen", "Yar", "Ard", "Bram",
    ],
    "codas": [
        "n", "ra", "ford", "wick", "ton", "by", "dale", "mere", "holm", "stead",
        "ley", "wyn", "ard", "ith", "ock", "ess", "ow", "an", "ir", "ey",
    ],
    "countries": [
        ("Elsmere", "Elsmerian"), ("Kestria", "Kestrian"), ("Dravonia", "Dravonian"),
        ("Norhal", "Norhalian"), ("Ostland", "Ostlandic"), ("Valmora", "Valmoran"),
        ("Brenmark", "Brenmarkish"), ("Calvoria", "Calvorian"),
    ],
    "first_names": [
        "Anna", "Tomas", "Clara", "Henrik", "Mira", "Jonas", "Elena", "Victor", "Ada",
        "Oskar", "Lena", "Arthur", "Ruth", "Felix", "Ida", "Samuel", "Nora", "Edwin",
        "Greta", "Walter",
    ],
    "female": {"Anna", "Clara", "Mira", "Elena", "Ada", "Lena", "Ruth", "Ida", "Nora", "Greta"},
    "last_names": [
        "Hollis", "Brenner", "Castell", "Dunmore", "Ellery", "Fairlie", "Garrow",
        "Hastrup", "Ingram", "Kessel", "Lorne", "Mattock", "Orwin", "Pellam", "Rusk",
        "Stroud", "Thorne", "Vance", "Wexley", "Ashby",
    ],
    "last_suffixes": ["holt", "ing", "son", "er", "man"],
    "directions": ["north", "south", "east", "west", "north-east", "south-west"],
    "direction_adjs": [
        "northern", "southern", "eastern", "western", "central", "north-western",
        "south-eastern",
    ],
    "months": [
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December",
    ],
    "usernames": [
        "Quillfeather", "RiverMapper", "Tarnwalker", "Greyheron", "MossyStone",
        "Lanternfish", "Northgate42", "Brackenridge", "Kestrel_77", "Old Harbour",
    ],
    "edit_comments": [
        "copyedit", "added citation", "/* History */ expanded", "fix typo",
        "Reverted edits by 192.0.2.14 (talk) to last version", "infobox update",
        "rm unsourced claim", "+cat", "link fixes", "",
    ],
    "species_suffixes": ["ia", "ella", "odon", "ops", "ura", "is"],
    "epithets": [
        "montana", "fluviatilis", "minor", "major", "rubra", "nigra", "borealis",
        "australis", "gracilis", "lacustris", "silvestris", "elegans",
    ],
    "device_words": ["loom", "engine", "lamp", "pump", "press", "wheel", "clock", "telegraph"],
    "org_patterns": [
        "{dem} Geographical Society", "{base} Railway Company",
        "{base} Institute of Technology", "Royal Society of {country}",
        "{dem} Naturalists' Union", "{base} Harbour Trust",
    ],
    "vocab": {
        "adj": [
            "small", "large", "narrow", "wide", "ancient", "remote", "fertile", "rocky",
            "quiet", "busy", "famous", "historic", "modern", "traditional", "rural",
            "coastal", "green", "dense", "shallow", "steep", "gentle", "important",
        ],
        "adjq": ["too expensive", "badly designed", "far too ambitious", "rushed", "confusing"],
        "noun": [
            "bridge", "harbour", "market", "valley", "forest", "mill", "castle", "library",
            "museum", "garden", "canal", "road", "farm", "village", "port", "school",
            "tower", "mine", "quarry", "lighthouse",
        ],
        "plural": [
            "rivers", "lakes", "valleys", "towns", "forests", "islands", "regions",
            "villages", "wetlands", "harbours",
        ],
        "building": [
            "church", "mill", "castle", "bridge", "school", "library", "station",
            "lighthouse", "monastery", "town hall", "market hall", "museum", "warehouse", "inn",
        ],
        "buildings": [
            "churches", "mills", "houses", "warehouses", "schools", "libraries", "inns",
            "farmhouses", "chapels", "town houses",
        ],
        "industry": [
            "farming", "fishing", "forestry", "mining", "tourism", "shipbuilding",
            "textile manufacturing", "brewing", "the timber trade", "wool production", "printing",
        ],
        "disaster": ["flood", "storm", "fire", "drought", "earthquake", "landslide"],
        "activity": ["fishing", "hunting", "logging", "mining", "building", "camping"],
        "transport": ["bus", "train", "ferry", "boat", "road"],
        "animal": ["otter", "heron", "beaver", "deer", "eagle", "owl", "fox", "swan", "crane", "wolf"],
        "animals": [
            "otters", "herons", "beavers", "red deer", "brown trout", "salmon", "eagles",
            "owls", "foxes", "badgers", "swans", "cranes", "wolves",
        ],
        "plants": ["orchids", "ferns", "mosses", "lilies", "oaks", "pines", "birches", "willows", "reeds"],
        "crop": ["wheat", "barley", "oats", "potatoes", "apples", "grapes", "flax", "rye", "honey", "cheese"],
        "material": ["timber", "wool", "granite", "coal", "iron", "copper", "salt", "clay", "limestone", "paper"],
        "language": ["Elsmerian", "Kestrian", "Dravonian", "Old Norhalian", "German", "French"],
        "festival": ["harvest", "spring", "river", "music", "lantern", "apple", "summer", "folk"],
        "structure": ["dam", "bridge", "tunnel", "canal", "railway", "harbour wall", "reservoir"],
        "war": ["Northern War", "War of the Three Crowns", "Civil War", "Second Coastal War"],
        "army": ["northern army", "royal army", "rebel forces", "allied forces", "coastal guard"],
        "group": ["scientists", "travellers", "engineers", "missionaries", "painters", "geologists", "students"],
        "workers": ["workers", "miners", "farmers", "fishermen", "labourers"],
        "pollutant": ["waste water", "chemical waste", "sewage", "farm run-off", "smoke"],
        "terrain": ["marshes", "hills", "mountain pass", "moors", "glacier", "dunes"],
        "saint": ["Mary", "John", "Peter", "Andrew", "Catherine", "Michael", "Anne", "George"],
        "colour": ["grey", "silver", "red", "golden", "black", "spotted", "striped", "pale"],
        "quote": [
            "the finest valley in the north", "a place of great beauty",
            "wild, cold and almost empty", "the heart of the country",
            "a quiet town with a long memory", "the most useful machine of the age",
            "a marvel of modern engineering", "nothing but rocks and water",
            "a small but proud community", "the best harbour on the coast",
        ],
        "meaning": [
            "grey water", "high meadow", "the place of the oaks", "cold spring",
            "white stone", "the long hill", "the crossing", "salt marsh",
        ],
        "profession": [
            "painter", "engineer", "botanist", "explorer", "novelist", "architect",
            "physician", "composer", "geologist", "politician", "mathematician", "poet",
        ],
        "known_for": [
            "studies of river birds", "early work on steam engines",
            "maps of the northern coast", "a series of landscape paintings",
            "the discovery of several new species", "the design of the {place_plain} bridge",
            "popular books on local history",
        ],
        "taxon": [
            "freshwater fish", "beetle", "songbird", "flowering plant", "moth", "frog",
            "fern", "snail", "butterfly", "lizard",
        ],
        "food": ["insects", "small fish", "seeds", "berries", "algae", "snails", "worms"],
        "habitat": [
            "fast-flowing streams", "wet meadows", "pine forests", "rocky slopes",
            "shallow lakes", "coastal marshes",
        ],
        "threat": ["habitat loss", "pollution", "over-fishing", "new roads", "drainage of wetlands"],
        "device": [
            "machine", "steam engine", "weaving loom", "lamp", "pump", "printing press",
            "measuring instrument", "water wheel", "clock",
        ],
        "purpose": [
            "pumping water out of mines", "weaving cloth", "measuring river depth",
            "lighting streets", "printing newspapers", "grinding grain",
        ],
        "part": ["cylinder", "wheel", "valve", "lens", "frame", "spring", "chamber"],
        "org_type": [
            "learned society", "railway company", "trade union", "charity",
            "research institute", "shipping company", "museum association",
        ],
        "town_type": ["market town", "village", "town", "city", "port town", "mining town", "parish"],
        "ordinal": ["second", "third", "fourth", "fifth", "sixth"],
        "publisher": [
            "Kestrel Press", "Northgate Books", "Elsmere University Press",
            "Harbour House", "Greyfield & Sons",
        ],
        "journal": [
            "Journal of Northern Geography", "Elsmere Historical Review",
            "Annals of Freshwater Biology", "Proceedings of the Kestrian Society",
        ],
        "paper": ["Gazette", "Herald", "Times", "Courier", "Evening Post"],
        "work_adj": ["Silent", "Grey", "Long", "Distant", "Hidden", "Northern", "Broken", "Golden", "Quiet"],
        "work_noun": ["Valley", "Shore", "River", "Road", "Harbour", "Garden", "Summer", "Crossing", "Lantern"],
        "views": ["view", "from the south", "in winter", "aerial view", "in 1910", "map", "bridge"],
        "link_labels": ["official archive", "survey report", "local history society", "photo collection"],
        "company_types": [
            "Brewing Company", "Railway Company", "Mining Company", "Shipping Line", "Textile Works",
        ],
        "cite_title": [
            "History of {region_plain}", "Annual report {year}",
            "Notes on the {adj} {noun}s of {place_plain}", "Census results for {place_plain}",
            "A survey of the {river_plain}", "The {work_noun} and the sea",
        ],
        "note_text": [
            "Some older maps give the name as {oldname}.",
            "The figure excludes the suburb of {place_plain}.",
            "Other sources give the year as {year}.",
        ],
        "comment": [
            "<!-- Please do not change this figure without a source -->",
            "<!-- see talk page before editing -->",
            "<!-- TODO: expand this section -->",
            "<!-- Image removed, see [[Talk:{T}]] -->",
        ],
        "caption": [
            "{S} near {place}", "The {building} at {place} in {year}",
            "View of {s} from the {direction}", "Map of {region_plain}<br />(c. {year})",
        ],
        "list_intro": [
            "Notable places nearby include:", "The main sights are:",
            "Works and places associated with it include:",
        ],
        "list_item": [
            "{place} – a {adj} {town_type}", "The {building} of St. {saint} (built {year})",
            "{work} ({year})", "{person}, {profession}", "The {adj} {noun} at {place}",
        ],
        "table_notes": [
            "first census", "after the {disaster}", "boundary change", "estimate", "&mdash;",
        ],
        "talk_topic": [
            "Source for the length", "Name origin", "Population figure", "Merge proposal",
            "Infobox image", "Possible copyright problem",
        ],
        "talk_line": [
            "The article gives a figure of {big}, but the source says approx. {big2}. Which one is correct?",
            "Is there a reliable source for the claim that {person} named it in {year}?",
            "I think this should be merged with [[{article}]], since most of the text is the same.",
        ],
        "talk_reply": [
            "Both figures appear in the literature; I have added a note.",
            "Good point. I found a reference in the {journal} and added it.",
            "Oppose. They are different topics, e.g. one is a {town_type} and the other is not.",
        ],
    },
    "short_desc": {
        "river": "River in {home_plain}", "lake": "Lake in {home_plain}",
        "mountain": "Mountain in {home_plain}", "settlement": "Town in {home_plain}",
        "person": "{nationality_plain} {profession} ({byear}–{dyear})",
        "species": "Species of {taxon}", "invention": "Early {device}",
        "organization": "{nationality_plain} {org_type}", "battle": "Battle of the {war}",
    },
    "leads": {
        "river": [
            "'''{T}''' is a {length}-kilometre river in {region}. It rises in the {hills} and flows into {lake}.",
            "The '''{T}''' is a river in {region}, approx. {km} long, and one of the main tributaries of the {river}.",
            "The '''{T}''' (also known as the {oldname}) is a river of {home} that flows through {place} and {place2}.",
        ],
        "lake": [
            "'''{T}''' is a freshwater lake in {region}. It covers an area of {area} and has a maximum depth of {num_m}.",
            "'''{T}''' is the largest lake in {home}, with a shoreline of about {km}.",
        ],
        "mountain": [
            "'''{T}''' is a mountain in the {range}, in {region}. At {num_m}, it is the {ordinal} highest peak in {home}.",
            "'''{T}''' ({num_m}) is a peak on the border between {home} and {country}.",
        ],
        "settlement": [
            "'''{T}''' is a {town_type} in {region}, with a population of {big} at the {year} census.",
            "'''{name}''' is a {town_type} and the administrative centre of {name} District in {home}.",
            "'''{name}''' is a small {town_type} on the {river}, approx. {km} {direction} of {place}.",
        ],
        "person": [
            "'''{T}''' ({bdate} – {ddate}) was a {nationality} {profession} known for {known_for}.",
            "'''{T}''' ({byear}–{dyear}) was a {nationality} {profession}, best known for {known_for}.",
        ],
        "species": [
            "'''''{T}''''' is a species of {taxon} in the family {family}. It is found in {region} and {region2}.",
            "'''''{T}''''', commonly known as the {common}, is a {taxon} native to {home}.",
        ],
        "invention": [
            "The '''{T}''' is a {device} invented by {person} in {fyear}. It was used mainly for {purpose}.",
            "The '''{T}''' was an early {device}, patented in {home} in {fyear} and widely copied in the U.S. and Europe.",
        ],
        "organization": [
            "The '''{T}''' is a {org_type} founded in {fyear} in {place}. Its headquarters are in {place2}.",
            "The '''{T}''' ('''{abbr}''') is a {nationality} {org_type} established in {fyear}.",
        ],
        "battle": [
            "The '''{T}''' was fought on {fdate} near {place}, between the armies of {home} and {country}.",
            "The '''{T}''' ({fyear}) was a battle of the {war}, fought near the {river}.",
        ],
    },
    # (tag, template): tag is "any", a group ("geo", "bio", "thing", "event") or a kind.
    "templates": [
        ("any", 'In {year}, {person} described {s} as "{quote}" in a report to the {org}.'),
        ("any", "By the {decade}, the population of {place} had grown to approx. {big} people."),
        ("any", 'According to {person}, the name is derived from an old word meaning "{meaning}".'),
        ("any", "The area is known for its {adj} {noun}s, e.g. the {adj2} {noun2} near {place}."),
        ("any", "Dr. {lastname} of the {university} published a detailed survey of the region in {year}."),
        ("any", "Several U.S. and European {group} visited {place} between {year} and {year2}."),
        ("any", "During the {war}, {place} served as a supply base for the {army}."),
        ("any", "A {adj} {building} was built at {place} in {year} (it was later rebuilt in {year2})."),
        ("any", "The local economy depends largely on {industry}, {industry2} and, to a lesser extent, {industry3}."),
        ("any", "On {date}, a severe {disaster} caused damage estimated at ${money} million."),
        ("any", "In {year} the government of {country} declared the area a protected zone, i.e. one in which {activity} is restricted."),
        ("any", "Visitors can reach {place} by {transport} from {place2}, a journey of about {hours} hours."),
        ("any", '{person} later wrote that the {noun} was "{quote}".'),
        ("any", "The {adj} climate of {region} supports a wide range of wildlife, including {animals}, {animals2} and several rare {plants}."),
        ("any", "The first modern {building} in {country} was opened by {person} in {year}."),
        ("any", "Approximately {pct}% of the residents speak {language} as a first language."),
        ("any", "Mr. {lastname} and his brother founded the {company} in {place} in {year}."),
        ("any", 'Critics such as {person} have argued that the new {structure} was "{adjq} and poorly planned".'),
        ("any", "Between {year} and {year2}, more than {big} {workers} were employed in {industry} in the area."),
        ("any", "A railway line to {place} opened in {year}, but it closed to passengers in {year2}."),
        ("any", 'The origin of the name is disputed; some scholars (e.g. {person}) link it to the {language} word for "{meaning}".'),
        ("any", "In the late {century} century the region was ruled by the {lastname} family."),
        ("any", "Prof. {lastname} estimated that about {big} {animals} live in the area today."),
        ("any", "Warehouse no. {num} was destroyed by fire on {date} and never rebuilt."),
        ("any", "Most of the {adj} {buildings} in {place} date from the {decade} and {decade2}."),
        ("any", "The annual {festival} festival, held every {month}, attracts approx. {big} visitors."),
        ("any", "{person} served as director of the {org} from {year} to {year2}, and was succeeded by {person2}."),
        ("any", "The old {building} at {place} is listed as a heritage site by the {org}."),
        ("any", 'What is now {place} was described by {person} as "a small village of {num} houses" in {year}.'),
        ("any", "Work on the {structure} began in {month} {year} and was finished {num} years later at a cost of approx. ${money} million."),
        ("any", "Reports from the U.K. and the U.S. in {year} described the {noun} at {place} as one of the best in the world."),
        ("any", "Exports include {crop}, {crop2}, {material} and {material2}."),
        ("any", "{person} (born {year}) is among the best-known writers from {place}."),
        ("any", "The area was settled by farmers from {place} in the early {century} century."),
        ("any", "Local tradition holds that a {colour} {animal} once guided travellers across the {terrain}."),
        ("any", "Is it true that {place} once had more {animals} than people? Records from {year} suggest that it may have."),
        ("any", 'The {noun} was renamed in {year}; its former name, "{oldname}", is still used by older residents.'),
        ("any", "Further details are available from the {extlink}."),
        ("any", "A {decimal} km walking trail (opened in {year}) runs along the {direction}ern edge of {place}."),
        ("any", "The results were published in {work} (vol. {num}, pp. {pages})."),
        ("any", "Since {year}, the {org} has held its annual meeting at {place} (except in {year2})."),
        ("any", "Officials in {place} (pop. {big}) voted {num}–{num2} in favour of the plan in {year}."),
        ("any", "The {adj} {noun} at {place} is shown on maps from as early as {year}, e.g. the one drawn by {person}."),
        ("geo", "{S} was first recorded in {year}, when {person} visited the area on behalf of the {org}."),
        ("geo", "{S} lies approx. {km} {direction} of {place}, near the border with {country}."),
        ("geo", "Annual rainfall averages {rain} mm, most of which falls between {month} and {month2}."),
        ("geo", "Today, {s} is managed jointly by the {org} and the town council of {place}."),
        ("geo", "The {org} lists {s} among the {num} most important {plural} in {home}."),
        ("geo", "Lt. Col. {lastname} led an expedition along the {river} in {year}, mapping roughly {km} of its banks."),
        ("geo", "Unlike most {plural} in the region, {s} was not fully surveyed until {year}."),
        ("geo", "{S} appears in the novel {work} (published {year}) by {person}."),
        ("river", "Its average depth is {decimal} m, although it reaches {num} m near the {direction}ern bank."),
        ("river", "{S} is often compared to the {river}, which is longer but carries less water."),
        ("river", "Water quality has improved since {year}, when new rules limited {pollutant} from nearby {industry} plants."),
        ("river", "The mean discharge at {place} is {discharge}, rising to several times that in {month}."),
        ("lake", "Its average depth is {decimal} m, although it reaches {num} m near the {direction}ern shore."),
        ("lake", "{S} is fed by the {river} and drained by the {river2}."),
        ("mountain", "The first recorded ascent was made by {person} and {person2} on {date}."),
        ("mountain", "The summit offers views as far as {place}, approx. {km} away."),
        ("settlement", "The population was {big} at the {year2} census, an increase of {pct}% since {year}."),
        ("settlement", "The St. {saint} church, completed c. {year}, is the oldest surviving building in {s}."),
        ("settlement", "Its highest point is {mountain} ({num_m} above sea level)."),
        ("bio", "{S} was born in {place} on {bdate}, the {ordinal} of {num} children."),
        ("bio", "{Pron} studied at the {university} under Dr. {lastname}, graduating in {year}."),
        ("bio", "In {year}, {pron} married {person}, a {profession} from {place2}."),
        ("bio", "{Pos} first major work, {work}, was published in {year} and sold approx. {big} copies."),
        ("bio", "{Pron} moved to the U.S. in {year} and spent {num} years working in Boston and Chicago."),
        ("bio", "{S} died in {place} on {ddate}, aged {dage}."),
        ("bio", "After {pos} death, {pos} papers were given to the library of the {university}."),
        ("bio", "{S} received the gold medal of the {org} in {year}."),
        ("bio", 'Critics praised {pos} later work, e.g. the series "{quote}" (c. {year}).'),
        ("species", "{S} lives mainly in {habitat} at altitudes of up to {num_m}."),
        ("species", "It feeds on {food} and {food2}, mostly at dawn and dusk."),
        ("species", "The species was first described by {person} in {fyear}."),
        ("species", "Adults reach a length of approx. {cm} cm and weigh up to {grams} g."),
        ("species", "Its numbers have fallen sharply since the {decade}, mainly because of {threat}."),
        ("species", "{S} is listed as vulnerable by the {org}."),
        ("invention", "The design was improved by {person} in {year}, who added a second {part}."),
        ("invention", "By {year}, more than {big} units had been sold in {country} and the U.S."),
        ("invention", "{S} was patented in {home} in {fyear} (patent no. {big})."),
        ("invention", "Early models cost approx. ${money} each, i.e. more than a worker earned in a year."),
        ("organization", "Its first president was {person}, who served until {year}."),
        ("organization", "{S} has approx. {big} members in {num} branches across {home}."),
        ("organization", "The {org_type} publishes a journal, {work}, twice a year."),
        ("battle", "The battle began at dawn on {fdate}, when approx. {big} soldiers crossed the {river}."),
        ("battle", "{person} commanded the {army}, while {person2} led the defenders."),
        ("battle", "Losses were heavy on both sides (approx. {big} dead)."),
        ("battle", "The battle is commemorated by a {building} built at {place} in {year}."),
        ("battle", "Historians, e.g. {person}, still disagree about the number of troops involved."),
        ("battle", "The result was a victory for {country}, which gained control of {place}."),
    ],
    "headings": {
        "river": ["Course", "Hydrology", "History", "Ecology", "Tributaries", "Bridges", "Recreation", "Pollution", "Etymology", "Economy"],
        "lake": ["Geography", "Hydrology", "History", "Ecology", "Fishing", "Tourism", "Etymology", "Climate"],
        "mountain": ["Geography", "Geology", "Climbing history", "Climate", "Flora and fauna", "Access", "Etymology"],
        "settlement": ["History", "Geography", "Climate", "Demographics", "Economy", "Culture", "Transport", "Education", "Notable people", "Etymology"],
        "person": ["Early life", "Education", "Career", "Later life", "Personal life", "Legacy", "Selected works", "Honours"],
        "species": ["Taxonomy", "Description", "Distribution and habitat", "Behaviour", "Diet", "Reproduction", "Conservation"],
        "invention": ["History", "Design", "Operation", "Adoption", "Legacy", "Variants", "Reception"],
        "organization": ["History", "Structure", "Activities", "Publications", "Membership", "Governance", "Controversies"],
        "battle": ["Background", "Prelude", "Battle", "Aftermath", "Casualties", "Legacy", "Commemoration"],
    },
    "subheadings": [
        "Early period", "19th century", "20th century", "Modern era", "Origins",
        "Later developments", "Flora", "Fauna", "Rail", "Road", "Museums", "Sport", "Reception",
    ],
    "trailing": {
        "see_also": "See also", "notes": "Notes", "references": "References",
        "further": "Further reading", "external": "External links",
    },
    "reflists": ["{{reflist}}", "{{Reflist|30em}}", "<references />", "{{reflist|refs=}}"],
    "citation_needed": "{{citation needed|date={month} {tagyear}}}",
    "extlink_sentence": "Further details are available from the {extlink}.",
    "hatnote": ["{{Main|{article}}}", "{{See also|{article}}}", "{{Further|{article}}}"],
    "see_also_extra": "List of {plural} of {home_plain}",
    "citations": [
        "{{cite web |url={url} |title={cite_title} |publisher={org_plain} |date={date_plain} |access-date={access_date}}}",
        "{{cite book |last={lastname} |first={firstname} |title={book_title} |publisher={publisher} |location={place_plain} |year={pubyear} |page={page} |isbn={isbn}}}",
        "{{cite journal |last={lastname} |first={firstname} |title={cite_title} |journal={journal} |volume={num} |issue={num2} |pages={pages} |year={pubyear} |doi=10.{doi}}}",
        "{{cite news |title={cite_title} |newspaper=The {place_plain} {paper} |date={date_plain} |url={url}}}",
        "{lastname}, {firstname} ({pubyear}). ''{book_title}''. {publisher}, p. {page}.",
        "{{Harvnb|{lastname}|{pubyear}|p={page}}}",
    ],
    "further": [
        "* {{cite book |last={lastname} |first={firstname} |title={book_title} |publisher={publisher} |year={pubyear}}}",
        "* {lastname}, {firstname} ({pubyear}). ''{book_title}''. {place_plain}: {publisher}.",
    ],
    "external": [
        "* [{url} Official website]",
        "* {{Commons category|{T}}}",
        "* [{url} {T}] at the {org_plain}",
        "* {{Official website|{url}}}",
    ],
    "categories": {
        "river": ["Rivers of {home_plain}", "Geography of {home_plain}"],
        "lake": ["Lakes of {home_plain}", "Geography of {home_plain}"],
        "mountain": ["Mountains of {home_plain}", "{range_plain}"],
        "settlement": ["Populated places in {home_plain}", "Towns in {home_plain}"],
        "person": ["{byear} births", "{dyear} deaths", "{nationality_plain} {profession}s", "People from {place_plain}"],
        "species": ["{family}", "Animals described in {fyear}", "Fauna of {home_plain}"],
        "invention": ["{nationality_plain} inventions", "{fyear} introductions"],
        "organization": ["Organizations established in {fyear}", "Organizations based in {home_plain}"],
        "battle": ["Battles involving {home_plain}", "Conflicts in {fyear}"],
    },
    "stub_suffix": {"river": "river", "lake": "lake", "mountain": "mountain", "settlement": "geo"},
    "infobox": {
        "river": ("Infobox river", [
            ("name", "{T}"), ("image", "{image}"), ("image_caption", "{caption}"),
            ("country", "{home}"), ("region", "{region}"), ("source1", "{hills}"),
            ("mouth", "{lake}"), ("length", "{km_convert}"), ("discharge1_avg", "{discharge}"),
            ("basin_size", "{area}"), ("tributaries_left", "{river}, {river2}"),
        ]),
        "lake": ("Infobox body of water", [
            ("name", "{T}"), ("image", "{image}"), ("caption", "{caption}"),
            ("location", "{region}"), ("type", "Freshwater lake"), ("inflow", "{river}"),
            ("outflow", "{river2}"), ("area", "{area}"), ("max-depth", "{num_m}"),
            ("cities", "{place}, {place2}"),
        ]),
        "mountain": ("Infobox mountain", [
            ("name", "{T}"), ("photo", "{image}"), ("photo_caption", "{caption}"),
            ("elevation_m", "{height}"), ("prominence_m", "{num}0"), ("range", "{range}"),
            ("location", "{region}"), ("first_ascent", "{year} by {person}"),
        ]),
        "settlement": ("Infobox settlement", [
            ("name", "{T}"), ("settlement_type", "{town_type}"), ("image_skyline", "{image}"),
            ("image_caption", "{caption}"), ("subdivision_type", "Country"),
            ("subdivision_name", "{home}"), ("established_date", "{year}"),
            ("population_total", "{big}<br /><small>({year2} census)</small>"),
            ("area_total_km2", "{decimal}"), ("website", "{{URL|www.example.org}}"),
        ]),
        "person": ("Infobox person", [
            ("name", "{T}"), ("image", "{image}"), ("caption", "{caption}"),
            ("birth_date", "{bdate_tpl}"), ("birth_place", "{place}, {home}"),
            ("death_date", "{ddate_tpl}"), ("death_place", "{place2}"),
            ("nationality", "{nationality}"), ("occupation", "{profession}"),
            ("known_for", "{known_for}"), ("spouse", "{person}"),
        ]),
        "species": ("Speciesbox", [
            ("image", "{image}"), ("image_caption", "{caption}"), ("status", "VU"),
            ("genus", "{genus}"), ("species", "{epithet}"), ("authority", "{lastname}, {fyear}"),
        ]),
        "invention": ("Infobox machine", [
            ("name", "{T}"), ("image", "{image}"), ("caption", "{caption}"),
            ("type", "{device}"), ("inventor", "{person}"), ("invented", "{fyear}"),
            ("manufacturer", "{company}"),
        ]),
        "organization": ("Infobox organization", [
            ("name", "{T}"), ("image", "{image}"), ("abbreviation", "{abbr}"),
            ("formation", "{{start date and age|{fyear}}}"), ("founder", "{person}"),
            ("headquarters", "{place}"), ("region_served", "{home}"),
            ("membership", "{big} <small>({year})</small>"), ("website", "{{URL|www.example.org}}"),
        ]),
        "battle": ("Infobox military conflict", [
            ("conflict", "{T}"), ("partof", "the {war}"), ("date", "{fdate}"),
            ("place", "near {place}, {home}"), ("result", "{country} victory"),
            ("combatant1", "{home}"), ("combatant2", "{country}"),
            ("commander1", "{person}"), ("commander2", "{person2}"),
            ("casualties1", "approx. {big} killed"), ("casualties2", "approx. {big2} killed"),
        ]),
    },
    "tables": {
        "caption_pop": "Population history",
        "headers_pop": ["Year", "Population", "Change"],
        "caption_list": "Selected events",
        "headers_list": ["Year", "Event", "Notes"],
        "event": [
            "Flood at {place_plain}", "New {building} opened", "Visit by {person_plain}",
            "Railway reaches {place_plain}", "Survey by the {org_plain}",
        ],
    },
    "pages": {
        "stub": "'''{T}''' is a {town_type} in {home_plain}.",
        "disambig_intro": "'''{T}''' may refer to:",
        "disambig_end": "{{disambiguation}}",
        "disambig_other": "* {T}, a character in the novel {work}",
        "redirect_word": ["#REDIRECT", "#REDIRECT", "#redirect"],
        "redirect_tail": "{{Redirect category shell|\n{{R from alternative name}}\n}}",
        "talk": (
            "{{WikiProject banner shell|class=Start|\n{{WikiProject {home_plain}|importance=Low}}\n}}\n\n"
            "== {talk_topic} ==\n{talk_line} [[User:{user}|{user}]] ([[User talk:{user}|talk]]) {sigdate} (UTC)\n"
            ":{talk_reply} [[User:{user2}|{user2}]] ([[User talk:{user2}|talk]]) {sigdate2} (UTC)\n"
            "::Thanks, that makes sense. ~~~~"
        ),
        "user": (
            "{{User en}}\n{{User de-2}}\nHello! I am {user}, a volunteer editor from {place_plain}. "
            "I mostly write about {plural} and local history.\n\n== Articles I have started ==\n"
            "* [[{article}]]\n* [[{article2}]]\n\n"
            "<small>If you leave a message, please sign it with ~~~~.</small>"
        ),
        "project": (
            "{{WikiProject status|active}}\n'''WikiProject {home_plain}''' is a group of editors who "
            "write and improve articles about [[{home_plain}]], its rivers, towns and people.\n\n"
            "== Goals ==\n* Expand stub articles, e.g. [[{article}]].\n"
            "* Add reliable sources (at least one per paragraph).\n"
            "* Upload free images to [[Wikimedia Commons]].\n\n== Participants ==\n"
            "# [[User:{user}|{user}]]\n# [[User:{user2}|{user2}]]\n\n[[Category:WikiProjects|{home_plain}]]"
        ),
        "file": (
            "== Summary ==\n{{Information\n|description={caption_plain}\n|date={iso_date}\n"
            "|source={{own}}\n|author=[[User:{user}|{user}]]\n}}\n\n== Licensing ==\n"
            "{{self|cc-by-sa-4.0}}\n\n[[Category:{cat}]]"
        ),
        "category": (
            "{{Commons category|{cat}}}\nThis category contains articles about {catdesc}.\n\n"
            "[[Category:{parentcat}]]\n[[Category:{home_plain}|{cat}]]"
        ),
        "catdesc": "the subject of [[{article}]] and related topics",
        "parentcat": "Geography of {home_plain}",
        "infobox_template": (
            "<includeonly>{{Infobox\n| bodyclass = vcard\n| above = {{{name|{{PAGENAME}}}}}\n"
            "| image = {{#if:{{{image|}}}|[[File:{{{image}}}|250px]]}}\n"
            "| caption = {{{caption|{{{image_caption|}}}}}}\n| label1 = Country\n| data1 = {{{country|}}}\n"
            "| label2 = Length\n| data2 = {{{length|}}}\n}}</includeonly><noinclude>\n"
            "{{Documentation}}\n[[Category:Infobox templates]]\n</noinclude>"
        ),
        "stub_template": (
            "{{asbox\n| image = Flag of {home_plain}.svg\n| pix = 30\n| subject = a location in [[{home_plain}]]\n"
            "| category = {home_plain} geography stubs\n| name = {tpl_title}\n}}<noinclude>\n"
            "[[Category:{home_plain} stub templates]]\n</noinclude>"
        ),
    },
}

# ---------------------------------------------------------------------------
# Chinese data
# ---------------------------------------------------------------------------

_ZH: dict = {
    "code": "zh",
    "dbname": "zhwiki",
    "base": "https://zh.wikipedia.org/wiki/Wikipedia:%E9%A6%96%E9%A1%B5",
    "joiner": "",
    "chars": [
        "青", "石", "云", "龙", "白", "安", "平", "华", "清", "长", "永", "明", "宁", "丰",
        "泰", "金", "玉", "凤", "溪", "桥", "林", "松", "梅", "兰", "月", "星", "海", "东",
        "西", "南", "北", "新", "古", "阳", "庆", "汉", "门", "马", "春", "秋",
    ],
    "countries": [
        ("西岚国", "西岚"), ("北原国", "北原"), ("东陵国", "东陵"), ("南屿国", "南屿"),
        ("云川国", "云川"), ("赤岭国", "赤岭"), ("白沙国", "白沙"), ("青丘国", "青丘"),
    ],
    "surnames": ["张", "王", "李", "赵", "陈", "刘", "杨", "黄", "周", "吴", "林", "郑", "孙", "何", "高", "罗"],
    "given": [
        "明", "华", "伟", "芳", "静", "强", "磊", "洋", "婷", "军", "文", "杰", "玉", "兰",
        "志", "国", "建", "秀", "英", "德",
    ],
    "female_given": {"芳", "静", "婷", "玉", "兰", "秀", "英"},
    "directions": ["北", "南", "东", "西", "东北", "西南"],
    "region_dirs": ["北", "南", "东", "西", "中", "东北", "西南"],
    "usernames": ["青石居士", "Lanternfish", "北原行者", "Mossystone", "云川客", "Tarnwalker"],
    "edit_comments": ["修正错字", "补充来源", "/* 历史 */ 扩充", "更新信息框", "+分类", "", "清理"],
    "species_kinds": ["鱼", "蛙", "蝶", "雀", "甲虫", "兰", "蜥"],
    "device_words": ["织布机", "蒸汽机", "灯", "水泵", "印刷机", "水车", "钟"],
    "org_patterns": ["{country}地理学会", "{base}铁路公司", "{base}大学", "{country}博物学会", "{base}港务局"],
    "s2t": {
        "龙": "龍", "华": "華", "长": "長", "宁": "寧", "丰": "豐", "凤": "鳳", "桥": "橋",
        "东": "東", "云": "雲", "兰": "蘭", "阳": "陽", "庆": "慶", "汉": "漢", "门": "門",
        "马": "馬", "县": "縣", "镇": "鎮", "岭": "嶺", "战": "戰", "机": "機", "织": "織",
        "铁": "鐵", "会": "會", "学": "學", "国": "國", "张": "張", "陈": "陳", "刘": "劉",
        "杨": "楊", "黄": "黃", "赵": "趙", "孙": "孫", "郑": "鄭", "罗": "羅", "吴": "吳",
        "伟": "偉", "军": "軍", "强": "強", "静": "靜", "杰": "傑", "鱼": "魚", "灯": "燈",
        "车": "車", "钟": "鐘", "岚": "嵐", "丘": "丘", "蛙": "蛙",
    },
    "vocab": {
        "adj": ["古老", "偏远", "肥沃", "宁静", "繁忙", "著名", "传统", "湿润", "温和", "险峻", "开阔", "重要", "独特"],
        "adjq": ["过于昂贵", "设计欠佳", "过于草率", "十分混乱"],
        "noun": ["石桥", "港口", "集市", "山谷", "森林", "磨坊", "城堡", "图书馆", "博物馆", "花园", "运河", "古道", "农场", "码头", "钟楼", "矿山"],
        "plural": ["河流", "湖泊", "山谷", "城镇", "森林", "岛屿", "地区", "村庄", "湿地"],
        "building": ["寺庙", "石桥", "城楼", "学堂", "祠堂", "灯塔", "钟楼", "会馆", "粮仓", "书院"],
        "industry": ["农业", "渔业", "林业", "采矿业", "旅游业", "造船业", "纺织业", "茶叶贸易", "制盐业", "陶瓷业"],
        "disaster": ["洪水", "暴风雨", "火灾", "旱灾", "地震", "山体滑坡"],
        "activity": ["捕鱼", "狩猎", "砍伐", "采矿", "开垦"],
        "transport": ["汽车", "火车", "渡轮", "客船"],
        "animal": ["水獭", "白鹭", "野鸭", "梅花鹿", "鲑鱼", "金雕", "猫头鹰", "狐狸", "天鹅", "丹顶鹤", "黑熊", "猕猴"],
        "plants": ["兰花", "蕨类", "苔藓", "百合", "松树", "柳树", "芦苇", "杜鹃花"],
        "crop": ["小麦", "大米", "茶叶", "柑橘", "玉米", "大豆", "蚕丝", "蜂蜜"],
        "material": ["木材", "羊毛", "花岗岩", "煤炭", "铁矿", "铜", "食盐", "陶土", "石灰石"],
        "language": ["西岚语", "北原语", "东陵方言", "古语"],
        "festival": ["丰收", "灯笼", "龙舟", "赏梅", "山歌", "茶"],
        "structure": ["水坝", "大桥", "隧道", "运河", "铁路", "水库", "堤防"],
        "war": ["北方战争", "三王战争", "内战", "第二次沿海战争"],
        "army": ["北方军", "王室军队", "起义军", "联军"],
        "group": ["科学家", "旅行者", "工程师", "传教士", "画家", "地质学家", "学生"],
        "workers": ["工人", "矿工", "农民", "渔民"],
        "pollutant": ["污水", "化学废料", "废气", "工业废水"],
        "terrain": ["沼泽", "丘陵", "山口", "草原", "冰川", "沙丘"],
        "temple": ["观音寺", "关帝庙", "城隍庙", "文庙", "天后宫"],
        "colour": ["灰色", "银色", "红色", "金色", "黑色", "白色"],
        "quote": [
            "北方最美的山谷", "一个宁静而美丽的地方", "荒凉、寒冷而几乎无人居住",
            "这个国家的心脏", "这个时代最有用的机器", "现代工程的奇迹", "只有石头和流水",
            "一个小而自豪的社区",
        ],
        "meaning": ["灰色的水", "高处的草地", "橡树之地", "寒泉", "白石", "长山", "渡口", "盐沼"],
        "profession": ["画家", "工程师", "植物学家", "探险家", "小说家", "建筑师", "医生", "作曲家", "地质学家", "政治家", "数学家", "诗人"],
        "known_for": ["对河流鸟类的研究", "早期蒸汽机的研究", "绘制北部海岸地图", "一系列山水画", "发现多个新物种", "撰写地方史"],
        "taxon": ["淡水鱼", "甲虫", "鸣禽", "开花植物", "蛾类", "蛙类", "蕨类植物", "蜗牛", "蝴蝶", "蜥蜴"],
        "food": ["昆虫", "小鱼", "种子", "浆果", "藻类", "蜗牛"],
        "habitat": ["湍急的溪流", "潮湿的草甸", "松林", "多岩石的山坡", "浅水湖泊", "沿海沼泽"],
        "threat": ["栖息地丧失", "水污染", "过度捕捞", "修建道路", "湿地排干"],
        "device": ["机器", "蒸汽机", "织布机", "灯具", "水泵", "印刷机", "测量仪器", "水车", "钟表"],
        "purpose": ["从矿井中抽水", "织布", "测量河流深度", "街道照明", "印刷报纸", "磨面粉"],
        "part": ["汽缸", "齿轮", "阀门", "透镜", "框架", "弹簧"],
        "org_type": ["学会", "铁路公司", "工会", "慈善机构", "研究所", "航运公司", "博物馆协会"],
        "town_type": ["集镇", "村庄", "县城", "城市", "港口城市", "矿业城镇"],
        "ordinal": ["第二", "第三", "第四", "第五"],
        "publisher": ["青石出版社", "北原大学出版社", "东陵书局", "云川文献社"],
        "journal": ["地理学报", "东陵历史评论", "淡水生物学刊", "北原学会会刊"],
        "paper": ["日报", "晚报", "时报", "新闻"],
        "work_title": ["寂静的山谷", "灰色的海岸", "漫长的道路", "遥远的港口", "隐秘的花园", "北方的冬天", "金色的田野"],
        "views": ["全景", "远眺", "冬景", "航拍", "旧照", "地图"],
        "link_labels": ["官方档案", "调查报告", "地方志", "图片集"],
        "company_types": ["酿酒公司", "铁路公司", "矿业公司", "航运公司", "纺织厂"],
        "cite_title": ["{place_plain}地方志", "{year}年度报告", "{home_plain}{noun}调查", "{region_plain}历史概述", "{river_plain}考察记"],
        "note_text": ["一些旧地图将其名称写作{oldname}。", "该数字不包括{place_plain}郊区。", "另有资料记载为{year}年。"],
        "comment": ["<!-- 请勿在没有来源的情况下修改此数字 -->", "<!-- 编辑前请先参阅讨论页 -->", "<!-- 待扩充 -->"],
        "caption": ["{place}附近的{s}", "{year}年的{place}{building}", "从{direction}面眺望{s}", "{region_plain}地图<br />（约{year}年）"],
        "list_intro": ["附近的主要地点包括：", "主要景点有：", "相关的作品与地点包括："],
        "list_item": ["{place}：一个{adj}的{town_type}", "{place}{temple}（建于{year}年）", "《{work}》（{year}年）", "{person}，{profession}"],
        "table_notes": ["首次普查", "{disaster}之后", "行政区划调整", "估计值", "—"],
        "talk_topic": ["长度的来源", "名称由来", "人口数字", "合并提议", "信息框图片"],
        "talk_line": [
            "条目中的数字是{big}，但来源中写的是约{big2}，哪一个是正确的？",
            "有没有可靠来源证明{person}在{year}年为其命名？",
            "我认为应当与[[{article}]]合并，因为两者内容大部分相同。",
        ],
        "talk_reply": ["两个数字在文献中都有出现，我已加上注释。", "说得对，我在《{journal}》中找到了来源并已补上。", "反对，两者是不同的主题。"],
    },
    "short_desc": {
        "river": "{home_plain}的河流", "lake": "{home_plain}的湖泊", "mountain": "{home_plain}的山峰",
        "settlement": "{home_plain}的城镇", "person": "{nationality_plain}{profession}",
        "species": "{taxon}的一种", "invention": "早期{device}", "organization": "{home_plain}的{org_type}",
        "battle": "{war}中的战役",
    },
    "leads": {
        "river": [
            "'''{T}'''是{region}的一条河流，全长{length}公里，发源于{hills}，最终注入{lake}。",
            "'''{T}'''（旧称{oldname}）是{home}的一条河流，流经{place}和{place2}。",
        ],
        "lake": ["'''{T}'''是位于{region}的淡水湖，面积约{area}，最大深度{num_m}。"],
        "mountain": ["'''{T}'''是{range}的一座山峰，位于{region}，海拔{num_m}，是{home}{ordinal}高峰。"],
        "settlement": [
            "'''{T}'''是{region}的一个{town_type}，根据{year}年人口普查，人口为{big}人。",
            "'''{T}'''是{home}的一个{town_type}，位于{river}沿岸。",
        ],
        "person": ["'''{T}'''（{bdate}—{ddate}），{nationality}{profession}，以{known_for}闻名。"],
        "species": ["'''{T}'''（学名：''{binomial}''）是{family}的一种{taxon}，分布于{region}和{region2}。"],
        "invention": ["'''{T}'''是{person}于{fyear}年发明的一种{device}，主要用于{purpose}。"],
        "organization": ["'''{T}'''是一个成立于{fyear}年的{org_type}，总部位于{place}。"],
        "battle": ["'''{T}'''是{fyear}年{home}与{country}之间在{place}附近爆发的一场战役。"],
    },
    "templates": [
        ("any", "{year}年，{person}在写给{org}的报告中称{s}为“{quote}”。"),
        ("any", "到{decade}年代，{place}的人口已增至约{big}人。"),
        ("any", "据{person}考证，这个名称源自古语，意为“{meaning}”。"),
        ("any", "该地区以{adj}的{noun}闻名，例如{place}附近的{noun2}。"),
        ("any", "{university}的{lastname}教授于{year}年发表了关于该地区的详细调查。"),
        ("any", "{year}年至{year2}年间，多批来自美国和欧洲的{group}曾到访{place}。"),
        ("any", "{war}期间，{place}曾是{army}的补给基地。"),
        ("any", "{year}年，当地在{place}修建了一座{building}（后于{year2}年重建）。"),
        ("any", "当地经济主要依赖{industry}和{industry2}，其次是{industry3}。"),
        ("any", "{date}，一场严重的{disaster}造成约{money}万元的损失！"),
        ("any", "{year}年，{country}政府将该地列为保护区，禁止{activity}。"),
        ("any", "游客可从{place2}乘{transport}前往{place}，全程约{hours}小时。"),
        ("any", "{person}后来写道，这里的{noun}是“{quote}”。"),
        ("any", "{region}气候{adj}，孕育了多种动植物，包括{animal}、{animal2}和几种珍稀的{plants}。"),
        ("any", "{year}年，{person}在{country}建成了第一座现代{building}。"),
        ("any", "约{pct}%的居民以{language}为母语。"),
        ("any", "{person}与其兄弟于{year}年在{place}创办了{company}。"),
        ("any", "{person}等学者认为，新建的{structure}“{adjq}”。"),
        ("any", "{year}年至{year2}年间，有超过{big}名{workers}在当地从事{industry}。"),
        ("any", "通往{place}的铁路于{year}年通车，但在{year2}年停止客运。"),
        ("any", "这个名称的来源存在争议，部分学者（如{person}）认为它与{language}中的“{meaning}”一词有关。"),
        ("any", "{century}世纪后期，该地区由{lastname}氏家族统治。"),
        ("any", "据{person}估计，目前约有{big}只{animal}生活在该地区。"),
        ("any", "第{num}号仓库在{date}毁于大火，此后再未重建。"),
        ("any", "{place}大部分{adj}的{building}建于{decade}年代。"),
        ("any", "每年{month}月举行的{festival}节吸引约{big}名游客。"),
        ("any", "{person}于{year}年至{year2}年间担任{org}主任，其后由{person2}接任。"),
        ("any", "{place}的{building}被{org}列为文化遗产。"),
        ("any", "{year}年，{person}形容今天的{place}是“一个只有{num}户人家的小村庄”。"),
        ("any", "{structure}于{year}年{month}月动工，{num}年后完工，耗资约{money}万元。"),
        ("any", "出口产品包括{crop}、{crop2}、{material}和{material2}。"),
        ("any", "{person}（{year}年出生）是{place}最著名的作家之一。"),
        ("any", "{century}世纪初，来自{place}的农民开始在此定居。"),
        ("any", "当地传说，曾有一只{colour}的{animal}引导旅人穿过{terrain}。"),
        ("any", "为什么这里的{animal}比人还多？{person}认为这与{adj}的气候有关。"),
        ("any", "该{noun}于{year}年更名，但当地老人仍沿用旧称“{oldname}”。"),
        ("any", "更多资料可参阅{extlink}。"),
        ("any", "一条长{decimal}公里的步道（{year}年开放）沿{place}的{direction}缘延伸。"),
        ("any", "研究结果发表于《{work}》第{num}卷，第{pages}页。"),
        ("any", "自{year}年起，{org}每年都在{place}举行年会（{year2}年除外）。"),
        ("any", "{place}（人口{big}）的官员于{year}年以{num}比{num2}的票数通过了该计划。"),
        ("any", "真是令人惊叹！早在{year}年，{person}绘制的地图上就已标出了{place}的{noun}。"),
        ("geo", "{S}最早见于{year}年的文献记载，当时{person}代表{org}到访此地。"),
        ("geo", "{S}位于{place}以{direction}约{km}处，靠近{country}边境。"),
        ("geo", "年平均降水量为{rain}毫米，主要集中在{month}月至{month2}月。"),
        ("geo", "目前，{s}由{org}和{place}地方政府共同管理。"),
        ("geo", "{org}将{s}列为{home}最重要的{num}个{plural}之一。"),
        ("geo", "{year}年，{lastname}上校率领考察队沿{river}而行，测绘了约{km}的河岸。"),
        ("geo", "{S}曾出现在{person}于{year}年出版的小说《{work}》中。"),
        ("river", "{S}平均深度为{decimal}米，{direction}岸附近最深处可达{num}米。"),
        ("river", "人们常将{s}与{river}相比较，后者更长，但水量较小。"),
        ("river", "自{year}年起，附近{industry}工厂的{pollutant}排放受到限制，水质因此明显改善。"),
        ("river", "{place}站的平均流量为{discharge}。"),
        ("lake", "{S}由{river}注入，经{river2}流出。"),
        ("mountain", "{person}和{person2}于{date}首次登顶。"),
        ("settlement", "根据{year2}年人口普查，当地人口为{big}人，比{year}年增长了{pct}%。"),
        ("settlement", "始建于约{year}年的{temple}是{s}现存最古老的建筑。"),
        ("bio", "{S}于{bdate}出生于{place}，是家中{num}个孩子之一。"),
        ("bio", "{Pron}曾在{university}学习，师从{person}，于{year}年毕业。"),
        ("bio", "{year}年，{pron}与{place2}的{profession}{person}结婚。"),
        ("bio", "{Pron}的第一部重要作品《{work}》出版于{year}年，销量约{big}册。"),
        ("bio", "{S}于{ddate}在{place}逝世，享年{dage}岁。"),
        ("bio", "{S}于{year}年获得{org}颁发的金质奖章。"),
        ("species", "{S}主要生活在海拔{num_m}以下的{habitat}。"),
        ("species", "它以{food}和{food2}为食，多在清晨和黄昏活动。"),
        ("species", "该物种由{person}于{fyear}年首次描述。"),
        ("species", "自{decade}年代以来，由于{threat}，其数量急剧下降。"),
        ("invention", "{person}于{year}年改进了设计，增加了第二个{part}。"),
        ("invention", "到{year}年，{country}和美国共售出超过{big}台。"),
        ("invention", "{S}于{fyear}年在{home}取得专利（专利号{big}）。"),
        ("organization", "首任会长为{person}，任职至{year}年。"),
        ("organization", "{S}在{home}各地设有{num}个分会，会员约{big}人。"),
        ("battle", "{fdate}黎明，约{big}名士兵渡过{river}，战斗由此开始。"),
        ("battle", "{person}指挥{army}，{person2}则率领守军。"),
        ("battle", "战斗以{country}的胜利告终，{place}从此归其控制。"),
    ],
    # A few sentences in Traditional characters, as found in real zhwiki text.
    "traditional": [
        "這個地區的經濟過去主要依靠{industry}和漁業。",
        "據說，當時的國王曾親自來到{place}視察。",
        "許多學者認為，這個名稱與古代的{noun}有關。",
        "{person}說：「這裡的{noun}是全國最好的。」",
        "這個國家的{org}於{year}年對{s}進行了調查。",
        "為什麼這裡的{animal}這麼多？當地人說這是因為氣候溫和。",
    ],
    "headings": {
        "river": ["河道", "水文", "历史", "生态", "支流", "桥梁", "休闲", "污染", "名称由来", "经济"],
        "lake": ["地理", "水文", "历史", "生态", "渔业", "旅游", "名称由来", "气候"],
        "mountain": ["地理", "地质", "登山史", "气候", "动植物", "交通", "名称由来"],
        "settlement": ["历史", "地理", "气候", "人口", "经济", "文化", "交通", "教育", "知名人物", "名称由来"],
        "person": ["早年生活", "教育", "职业生涯", "晚年", "个人生活", "影响", "主要作品", "荣誉"],
        "species": ["分类", "形态", "分布与栖息地", "习性", "食性", "繁殖", "保护现状"],
        "invention": ["历史", "设计", "工作原理", "推广", "影响", "型号", "评价"],
        "organization": ["历史", "组织架构", "活动", "出版物", "会员", "管理", "争议"],
        "battle": ["背景", "序幕", "战斗经过", "结果", "伤亡", "影响", "纪念"],
    },
    "subheadings": ["早期", "19世纪", "20世纪", "现代", "起源", "后期发展", "植物", "动物", "铁路", "公路", "博物馆", "体育", "评价"],
    "trailing": {
        "see_also": "参见", "notes": "注释", "references": "参考文献",
        "further": "延伸阅读", "external": "外部链接",
    },
    "reflists": ["{{reflist}}", "{{Reflist|2}}", "<references />"],
    "extlink_sentence": "更多资料可参阅{extlink}。",
    "citation_needed": "{{fact|time={tagyear}-{month2digit}-{day2digit}T00:00:00+00:00}}",
    "hatnote": ["{{main|{article}}}", "{{see also|{article}}}"],
    "see_also_extra": "{home_plain}{plural}列表",
    "citations": [
        "{{cite web |url={url} |title={cite_title} |publisher={org_plain} |date={date_plain} |access-date={access_date}}}",
        "{{cite book |author={person_plain} |title={book_title} |publisher={publisher} |location={place_plain} |year={pubyear} |page={page}}}",
        "{{cite journal |author={person_plain} |title={cite_title} |journal={journal} |volume={num} |issue={num2} |pages={pages} |year={pubyear}}}",
        "{{cite news |title={cite_title} |newspaper={place_plain}{paper} |date={date_plain} |url={url}}}",
        "{person_plain}：《{book_title}》，{publisher}，{pubyear}年，第{page}页。",
    ],
    "further": [
        "* {{cite book |author={person_plain} |title={book_title} |publisher={publisher} |year={pubyear}}}",
        "* {person_plain}：《{book_title}》，{place_plain}：{publisher}，{pubyear}年。",
    ],
    "external": ["* [{url} 官方网站]", "* {{Commons category|{T}}}", "* [{url} {T}]，{org_plain}"],
    "categories": {
        "river": ["{home_plain}河流", "{home_plain}地理"],
        "lake": ["{home_plain}湖泊", "{home_plain}地理"],
        "mountain": ["{home_plain}山峰", "{range_plain}"],
        "settlement": ["{home_plain}城镇", "{home_plain}行政区划"],
        "person": ["{byear}年出生", "{dyear}年逝世", "{home_plain}{profession}", "{place_plain}人"],
        "species": ["{family}", "{fyear}年描述的物种", "{home_plain}动物"],
        "invention": ["{home_plain}发明", "{fyear}年面世"],
        "organization": ["{fyear}年建立的组织", "{home_plain}组织"],
        "battle": ["{home_plain}战役", "{fyear}年冲突"],
    },
    "stub_suffix": {"river": "river", "lake": "lake", "mountain": "mountain", "settlement": "geo"},
    "infobox": {
        "river": ("Infobox river", [
            ("name", "{T}"), ("image", "{image}"), ("image_caption", "{caption}"),
            ("country", "{home}"), ("source1", "{hills}"), ("mouth", "{lake}"),
            ("length", "{km_convert}"), ("discharge1_avg", "{discharge}"), ("basin_size", "{area}"),
        ]),
        "lake": ("Infobox lake", [
            ("name", "{T}"), ("image", "{image}"), ("caption", "{caption}"),
            ("location", "{region}"), ("inflow", "{river}"), ("outflow", "{river2}"),
            ("area", "{area}"), ("max-depth", "{num_m}"),
        ]),
        "mountain": ("Infobox mountain", [
            ("name", "{T}"), ("photo", "{image}"), ("elevation_m", "{height}"),
            ("range", "{range}"), ("location", "{region}"), ("first_ascent", "{year}年，{person}"),
        ]),
        "settlement": ("Infobox settlement", [
            ("name", "{T}"), ("settlement_type", "{town_type}"), ("image_skyline", "{image}"),
            ("subdivision_type", "国家"), ("subdivision_name", "{home}"),
            ("population_total", "{big}<br /><small>（{year}年）</small>"),
            ("website", "{{URL|www.example.org}}"),
        ]),
        "person": ("Infobox person", [
            ("name", "{T}"), ("image", "{image}"), ("birth_date", "{bdate_tpl}"),
            ("birth_place", "{home}{place}"), ("death_date", "{ddate_tpl}"),
            ("nationality", "{nationality}"), ("occupation", "{profession}"),
        ]),
        "species": ("Speciesbox", [
            ("name", "{T}"), ("image", "{image}"), ("status", "VU"), ("genus", "{genus}"),
            ("species", "{epithet}"), ("authority", "{lastname}, {fyear}"),
        ]),
        "invention": ("Infobox machine", [
            ("name", "{T}"), ("image", "{image}"), ("type", "{device}"),
            ("inventor", "{person}"), ("invented", "{fyear}年"), ("manufacturer", "{company}"),
        ]),
        "organization": ("Infobox organization", [
            ("name", "{T}"), ("image", "{image}"), ("formation", "{fyear}年"),
            ("founder", "{person}"), ("headquarters", "{place}"), ("membership", "{big}人"),
        ]),
        "battle": ("Infobox military conflict", [
            ("conflict", "{T}"), ("partof", "{war}"), ("date", "{fdate}"),
            ("place", "{home}{place}附近"), ("result", "{country}胜利"),
            ("combatant1", "{home}"), ("combatant2", "{country}"),
            ("commander1", "{person}"), ("commander2", "{person2}"),
        ]),
    },
    "tables": {
        "caption_pop": "历年人口",
        "headers_pop": ["年份", "人口", "变化"],
        "caption_list": "大事记",
        "headers_list": ["年份", "事件", "备注"],
        "event": ["{place_plain}发生洪水", "新{building}落成", "{person_plain}来访", "铁路通至{place_plain}", "{org_plain}进行考察"],
    },
    "pages": {
        "stub": "'''{T}'''是{home_plain}的一个地名。",
        "disambig_intro": "'''{T}'''可以指：",
        "disambig_end": "{{disambig}}",
        "disambig_other": "* {T}，小说《{work}》中的人物",
        "redirect_word": ["#REDIRECT", "#重定向", "#REDIRECT"],
        "redirect_tail": "{{简繁重定向}}",
        "talk": (
            "{{WikiProject banner shell|class=Start|\n{{WikiProject {home_plain}|importance=Low}}\n}}\n\n"
            "== {talk_topic} ==\n{talk_line}——[[User:{user}|{user}]]（[[User talk:{user}|留言]]）{sigdate} (UTC)\n"
            ":{talk_reply}——[[User:{user2}|{user2}]]（[[User talk:{user2}|留言]]）{sigdate2} (UTC)\n"
            "::谢谢，明白了。~~~~"
        ),
        "user": (
            "{{User zh}}\n{{User en-2}}\n你好！我是{user}，一名来自{place_plain}的志愿编者，"
            "主要编写关于{plural}和地方历史的条目。\n\n== 我创建的条目 ==\n"
            "* [[{article}]]\n* [[{article2}]]\n\n<small>留言时请记得签名（~~~~）。</small>"
        ),
        "project": (
            "{{WikiProject status|active}}\n'''{home_plain}专题'''是一个由编者组成的小组，"
            "致力于撰写和改进关于[[{home_plain}]]的河流、城镇与人物的条目。\n\n"
            "== 目标 ==\n* 扩充小作品，例如[[{article}]]。\n* 为每个段落补充可靠来源。\n\n"
            "== 参与者 ==\n# [[User:{user}|{user}]]\n# [[User:{user2}|{user2}]]\n\n[[Category:维基专题|{home_plain}]]"
        ),
        "file": (
            "== 概述 ==\n{{Information\n|description={caption_plain}\n|date={iso_date}\n"
            "|source={{own}}\n|author=[[User:{user}|{user}]]\n}}\n\n== 授权协议 ==\n"
            "{{self|cc-by-sa-4.0}}\n\n[[Category:{cat}]]"
        ),
        "category": (
            "{{Commons category|{cat}}}\n本分类收录关于{catdesc}的条目。\n\n"
            "[[Category:{parentcat}]]\n[[Category:{home_plain}|{cat}]]"
        ),
        "catdesc": "[[{article}]]及相关主题",
        "parentcat": "{home_plain}地理",
        "infobox_template": (
            "<includeonly>{{Infobox\n| bodyclass = vcard\n| above = {{{name|{{PAGENAME}}}}}\n"
            "| image = {{#if:{{{image|}}}|[[File:{{{image}}}|250px]]}}\n"
            "| label1 = 国家\n| data1 = {{{country|}}}\n| label2 = 长度\n| data2 = {{{length|}}}\n"
            "}}</includeonly><noinclude>\n{{Documentation}}\n[[Category:信息框模板]]\n</noinclude>"
        ),
        "stub_template": (
            "{{asbox\n| image = Flag of {home_plain}.svg\n| pix = 30\n| subject = [[{home_plain}]]地理\n"
            "| category = {home_plain}地理小作品\n| name = {tpl_title}\n}}<noinclude>\n"
            "[[Category:{home_plain}小作品模板]]\n</noinclude>"
        ),
    },
}

# fmt: on

_LANG_DATA = {"en": _EN, "zh": _ZH}


# ---------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------


@dataclass
class _Subject:
    """One article's topic: what the sentence templates say "it" is."""

    kind: str
    title: str
    base: str  # the invented name it is built on ("Varn" of "Varn River")
    short: str  # how the text names it ("the Varn River", "Hollis")
    home: int  # index into the language's country list
    refs_cap: list[str]  # sentence-initial ways to refer to it ("The river", "It")
    refs_low: list[str]  # the same, mid-sentence
    facts: dict[str, str] = field(default_factory=dict)
    headings: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    mdy: bool = False  # English date style of the article: "May 3, 1850" or "3 May 1850"


@dataclass
class _Page:
    title: str
    ns: int
    text: str
    redirect: str | None = None


@dataclass
class _ArticleState:
    """Per-article bookkeeping while writing its text."""

    named_refs: list[str] = field(default_factory=list)  # defined so far, reusable
    want_notes: bool = False  # the article has a Notes section, so {{efn}} may appear


class _Generator:
    """Writes all pages of one dump from a seeded random generator."""

    def __init__(self, data: dict, rng: random.Random) -> None:
        self.d = data
        self.v: dict[str, list[str]] = data["vocab"]
        self.rng = rng
        self.zh = data["code"] == "zh"
        self.used_titles: set[str] = set()
        self.used_bases: set[str] = set()
        self.subj: _Subject | None = None
        self.deck: list[str] = []  # sentence templates not yet used in this article
        self.plain = False  # set while a ``*_plain`` placeholder is being filled
        self.articles: list[_Subject] = []
        # Pools of names that recur across articles, as (link target, label, base).
        self.places: list[tuple[str, str, str]] = []
        self.rivers: list[tuple[str, str, str]] = []
        self.lakes: list[tuple[str, str, str]] = []
        self.mountains: list[tuple[str, str, str]] = []
        self.orgs: list[tuple[str, str, str]] = []
        self.people: list[str] = []

    # -- names ---------------------------------------------------------------

    def _new_base(self) -> str:
        """A fresh invented name ("Varn", "青石"), never used before in this dump."""
        for _ in range(1000):
            if self.zh:
                a, b = self.rng.sample(self.d["chars"], 2)
                base = a + b
            else:
                base = self.rng.choice(self.d["onsets"]) + self.rng.choice(self.d["codas"])
            if base not in self.used_bases:
                self.used_bases.add(base)
                return base
        raise RuntimeError("ran out of invented names")

    def _claim(self, title: str) -> bool:
        if title in self.used_titles:
            return False
        self.used_titles.add(title)
        return True

    def _country(self, idx: int) -> tuple[str, str]:
        return self.d["countries"][idx]

    def _new_person_name(self) -> tuple[str, str, str]:
        """(full name, first name, last name), unique within the dump."""
        while True:
            if self.zh:
                last = self.rng.choice(self.d["surnames"])
                first = "".join(self.rng.sample(self.d["given"], self.rng.choice([1, 2])))
                full = last + first
            else:
                first = self.rng.choice(self.d["first_names"])
                if self.rng.random() < 0.6:
                    last = self.rng.choice(self.d["last_names"])
                else:
                    last = self.rng.choice(self.d["onsets"]) + self.rng.choice(self.d["last_suffixes"])
                full = f"{first} {last}"
            if self._claim(full):
                return full, first, last

    def _make_pools(self) -> None:
        """Background names (places, people ...) that sentences mention."""
        for _ in range(30):
            base = self._new_base()
            label = base + self.rng.choice(["镇", "县", "市", "村"]) if self.zh else base
            self.places.append((label, label, base))
        named = (
            (self.rivers, 10, "{} River", "河"),
            (self.lakes, 6, "Lake {}", "湖"),
            (self.mountains, 6, "Mount {}", "山"),
        )
        for pool, count, en_pattern, zh_suffix in named:
            for _ in range(count):
                base = self._new_base()
                name = base + zh_suffix if self.zh else en_pattern.format(base)
                pool.append((name, name, base))
        for _ in range(8):
            self.orgs.append(self._org_name())
        for _ in range(30):
            self.people.append(self._new_person_name()[0])

    def _org_name(self) -> tuple[str, str, str]:
        while True:
            base = self._new_base()
            country, dem = self._country(self.rng.randrange(len(self.d["countries"])))
            pattern = self.rng.choice(self.d["org_patterns"])
            name = pattern.replace("{base}", base).replace("{country}", country).replace("{dem}", dem)
            if self._claim(name):
                return name, name, base

    # -- subjects ------------------------------------------------------------

    def _make_subject(self, kind: str, base: str | None = None, comma_title: bool = False) -> _Subject:
        """Invent an article topic of ``kind``; ``base`` forces its name."""
        rng = self.rng
        home = rng.randrange(len(self.d["countries"]))
        country, dem = self._country(home)
        facts: dict[str, str] = {}
        while True:
            b = base or self._new_base()
            title, short, cap, low = self._title_for(kind, b, (country, dem), comma_title, facts)
            if self._claim(title):
                break
            base = None  # forced name collided; fall back to a fresh one
        subj = _Subject(kind, title, b, short, home, cap, low, facts, mdy=self.rng.random() < 0.4)
        self.subj = subj  # facts are written in the subject's own date style
        self._add_facts(subj)
        self.subj = None
        return subj

    def _title_for(
        self, kind: str, b: str, home: tuple[str, str], comma: bool, facts: dict[str, str]
    ) -> tuple[str, str, list[str], list[str]]:
        """(title, short name, sentence-initial refs, mid-sentence refs) for a topic."""
        rng = self.rng
        country, dem = home
        if self.zh:
            generic = {
                "river": "该河",
                "lake": "该湖",
                "mountain": "该山",
                "settlement": "该镇",
                "species": "该物种",
                "invention": "这种机器",
                "organization": "该组织",
                "battle": "这场战役",
            }
            if kind == "person":
                full, _first, last = self._new_person_name()
                self.used_titles.discard(full)  # claimed again by the caller
                female = any(ch in self.d["female_given"] for ch in full[1:])
                facts.update(pron="她" if female else "他", sortkey=full)
                return full, full, [full, facts["pron"]], [full, facts["pron"]]
            if kind == "river":
                title = b + rng.choice(["河", "江", "溪"])
            elif kind == "lake":
                title = b + "湖"
            elif kind == "mountain":
                title = b + rng.choice(["山", "峰", "岭"])
            elif kind == "settlement":
                title = b + rng.choice(["镇", "县", "市"])
            elif kind == "species":
                title = b + rng.choice(self.d["species_kinds"])
            elif kind == "invention":
                title = b + "式" + rng.choice(self.d["device_words"])
            elif kind == "organization":
                pattern = rng.choice(self.d["org_patterns"])
                title = pattern.replace("{base}", b).replace("{country}", country)
            else:
                title = b + rng.choice(["之战", "战役", "围城战"])
            return title, title, [title, generic[kind]], [title, generic[kind]]

        if kind == "person":
            full, first, last = self._new_person_name()
            self.used_titles.discard(full)
            female = first in self.d["female"]
            facts.update(
                Pron="She" if female else "He",
                pron="she" if female else "he",
                Pos="Her" if female else "His",
                pos="her" if female else "his",
                obj="her" if female else "him",
                sortkey=f"{last}, {first}",
                first=first,
            )
            return full, last, [last, facts["Pron"]], [last, facts["obj"]]
        if kind == "river":
            title = f"{b} River"
            return title, title, [f"The {title}", "The river", "It"], [f"the {title}", "the river", "it"]
        if kind == "lake":
            title = f"Lake {b}"
            return title, title, [title, "The lake", "It"], [title, "the lake", "it"]
        if kind == "mountain":
            title = rng.choice([f"Mount {b}", f"{b} Peak"])
            return title, title, [title, "The mountain", "It"], [title, "the mountain", "it"]
        if kind == "settlement":
            title = f"{b}, {country}" if comma or rng.random() < 0.3 else b
            return title, b, [b, "The town", "It"], [b, "the town", "it"]
        if kind == "species":
            genus = b + rng.choice(self.d["species_suffixes"])
            epithet = rng.choice(self.d["epithets"])
            facts.update(genus=genus, epithet=epithet, family=genus[:-1].rstrip("aeiou") + "idae")
            title = f"{genus} {epithet}"
            short = f"''{genus[0]}. {epithet}''"
            return title, short, [short, "The species", "It"], [short, "the species", "it"]
        if kind == "invention":
            owner = b if rng.random() < 0.5 else rng.choice(self.d["last_names"])
            title = f"{owner} {rng.choice(self.d['device_words'])}"
            return title, title, [f"The {title}", "The device", "It"], [f"the {title}", "the device", "it"]
        if kind == "organization":
            pattern = rng.choice(self.d["org_patterns"])
            title = pattern.replace("{base}", b).replace("{country}", country).replace("{dem}", dem)
            words = [w for w in title.replace("'", "").split() if w[0].isupper()]
            facts["abbr"] = "".join(w[0] for w in words)
            return title, title, [f"The {title}", "The society", "It"], [f"the {title}", "the society", "it"]
        title = f"{rng.choice(['Battle', 'Siege'])} of {b}"
        return title, title, [f"The {title}", "The battle", "It"], [f"the {title}", "the battle", "it"]

    def _add_facts(self, subj: _Subject) -> None:
        """Dates and other facts that several sentences of one article share."""
        rng, f = self.rng, subj.facts
        if subj.kind == "person":
            f["profession"] = rng.choice(self.v["profession"])
            birth = rng.randint(1780, 1930)
            death = birth + rng.randint(38, 95)
            bm, bd, dm, dd = rng.randint(1, 12), rng.randint(1, 28), rng.randint(1, 12), rng.randint(1, 28)
            f.update(
                byear=str(birth),
                dyear=str(death),
                dage=str(death - birth - (1 if dm < bm else 0)),
                bdate=self._format_date(birth, bm, bd),
                ddate=self._format_date(death, dm, dd),
                bdate_tpl=f"{{{{birth date|{birth}|{bm}|{bd}}}}}",
                ddate_tpl=f"{{{{death date and age|{death}|{dm}|{dd}|{birth}|{bm}|{bd}}}}}",
            )
        year = rng.randint(1650, 1960)
        f.setdefault("fyear", str(year))
        f.setdefault("fdate", self._format_date(year, rng.randint(1, 12), rng.randint(1, 28)))
        if subj.kind == "species":
            f["taxon"] = rng.choice(self.v["taxon"])
            if self.zh:
                # zhwiki gives the Latin name in the lead; invent one.
                genus = rng.choice(_EN["onsets"]) + rng.choice(_EN["species_suffixes"])
                f.update(genus=genus, epithet=rng.choice(_EN["epithets"]), family=subj.base + "科")
                f["binomial"] = f"{f['genus']} {f['epithet']}"
            else:
                f["common"] = f"{rng.choice(self.v['colour'])} {f['taxon']}"

    # -- formatting of numbers and dates ----------------------------------------

    def _format_date(self, y: int, m: int, d: int) -> str:
        if self.zh:
            return f"{y}年{m}月{d}日"
        month = self.d["months"][m - 1]
        return f"{month} {d}, {y}" if self.subj is not None and self.subj.mdy else f"{d} {month} {y}"

    def _int(self, n: int) -> str:
        return str(n) if self.zh else f"{n:,}"

    def _measure(self, n: int, unit: str, convert_to: str, zh_unit: str) -> str:
        """A measurement written one of the ways real articles write it."""
        r = self.rng.random()
        if r < 0.35:
            return f"{{{{convert|{n}|{unit}|{convert_to}}}}}"
        if r < 0.55:
            return f"{self._int(n)}&nbsp;{zh_unit if self.zh else unit}"
        return f"{self._int(n)}{zh_unit}" if self.zh else f"{self._int(n)} {unit}"

    # -- placeholder filling -----------------------------------------------------

    def fill(self, template: str, extra: dict[str, str] | None = None) -> str:
        """Replace every ``{key}`` of ``template``; repeated keys get one value."""
        cache: dict[str, str] = dict(extra or {})
        years: dict[int, int] = {}

        def repl(m: re.Match[str]) -> str:
            key = m.group(1)
            if key not in cache:
                # {industry2} should differ from {industry}: retry a few times.
                stem = key.rstrip("0123456789")
                taken = {v for k, v in cache.items() if k != key and k.rstrip("0123456789") == stem}
                for _ in range(5):
                    cache[key] = self._value(key, years)
                    if cache[key] not in taken:
                        break
            return cache[key]

        return _PLACEHOLDER.sub(repl, template)

    def _value(self, key: str, years: dict[int, int]) -> str:
        """One placeholder's text: a subject fact, a ``_f_<key>`` method's output,
        or a word from the vocabulary (in that order of precedence)."""
        plain = key.endswith("_plain")
        name = key[: -len("_plain")] if plain else key
        base = name.rstrip("0123456789")
        outer, self.plain = self.plain, self.plain or plain
        try:
            subj = self.subj
            if subj is not None and name in subj.facts:
                return subj.facts[name]
            method = getattr(self, "_f_" + base, None)
            if method is not None:
                return method(name, years)
            if base in self.v:
                word = self.rng.choice(self.v[base])
                # Vocabulary entries may themselves contain placeholders.
                return self.fill(word) if "{" in word else word
            raise KeyError(f"unknown placeholder {{{key}}}")
        finally:
            self.plain = outer

    def _link(self, target: str, label: str, p: float) -> str:
        if self.plain or self.rng.random() >= p:
            return label
        return f"[[{target}]]" if target == label else f"[[{target}|{label}]]"

    # Subject references.
    def _f_T(self, key: str, years: dict[int, int]) -> str:
        return self.subj.title

    def _f_name(self, key: str, years: dict[int, int]) -> str:
        return self.subj.base

    def _f_S(self, key: str, years: dict[int, int]) -> str:
        return self.rng.choices(self.subj.refs_cap, weights=[5, 3, 2][: len(self.subj.refs_cap)])[0]

    def _f_s(self, key: str, years: dict[int, int]) -> str:
        return self.rng.choices(self.subj.refs_low, weights=[5, 3, 2][: len(self.subj.refs_low)])[0]

    def _f_Pron(self, key: str, years: dict[int, int]) -> str:
        # English persons carry Pron/pron in their facts; Chinese has one form.
        return self.subj.facts.get("pron", "它")

    _f_pron = _f_Pron

    def _f_home(self, key: str, years: dict[int, int]) -> str:
        name = self._country(self.subj.home)[0]
        return self._link(name, name, 0.3)

    def _f_country(self, key: str, years: dict[int, int]) -> str:
        name = self.rng.choice(self.d["countries"])[0]
        return self._link(name, name, 0.3)

    def _f_nationality(self, key: str, years: dict[int, int]) -> str:
        country, dem = self._country(self.subj.home)
        return self._link(country, country if self.zh else dem, 0.2)

    def _f_region(self, key: str, years: dict[int, int]) -> str:
        home = self._f_home(key, years)
        if self.zh:
            return f"{home}{self.rng.choice(self.d['region_dirs'])}部"
        return f"{self.rng.choice(self.d['direction_adjs'])} {home}"

    def _f_direction(self, key: str, years: dict[int, int]) -> str:
        return self.rng.choice(self.d["directions"])

    def _pick(self, pool: list[tuple[str, str, str]], p: float) -> str:
        # An article should not compare its topic with itself.
        own = self.subj.title if self.subj else None
        candidates = [e for e in pool if e[0] != own] or pool
        target, label, _ = self.rng.choice(candidates)
        return self._link(target, label, p)

    def _f_place(self, key: str, years: dict[int, int]) -> str:
        return self._pick(self.places, 0.35)

    def _f_river(self, key: str, years: dict[int, int]) -> str:
        return self._pick(self.rivers, 0.3)

    def _f_lake(self, key: str, years: dict[int, int]) -> str:
        return self._pick(self.lakes, 0.3)

    def _f_mountain(self, key: str, years: dict[int, int]) -> str:
        return self._pick(self.mountains, 0.3)

    def _f_org(self, key: str, years: dict[int, int]) -> str:
        return self._pick(self.orgs, 0.25)

    def _f_article(self, key: str, years: dict[int, int]) -> str:
        # Always plain: callers wrap it in [[...]] or a hatnote template.
        return self.rng.choice(self.articles).title

    def _f_person(self, key: str, years: dict[int, int]) -> str:
        full = self.rng.choice(self.people)
        if self.plain or self.zh:
            return self._link(full, full, 0.25)
        r = self.rng.random()
        if r < 0.1:
            return "Dr. " + self._link(full, full, 0.25)
        if r < 0.2:
            first, last = full.split(" ", 1)
            middle = self.rng.choice("ABCDEFGHJKLMNPRSTW")
            return self._link(full, f"{first[0]}. {middle}. {last}", 0.2)
        return self._link(full, full, 0.25)

    def _f_lastname(self, key: str, years: dict[int, int]) -> str:
        if self.zh:
            return self.rng.choice(self.d["surnames"])
        return self.rng.choice(self.people).split(" ", 1)[1]

    def _f_firstname(self, key: str, years: dict[int, int]) -> str:
        if self.zh:
            return self.rng.choice(self.d["given"])
        return self.rng.choice(self.people).split(" ", 1)[0]

    def _f_user(self, key: str, years: dict[int, int]) -> str:
        return self.rng.choice(self.d["usernames"])

    def _f_university(self, key: str, years: dict[int, int]) -> str:
        _, label, base = self.rng.choice(self.places)
        name = f"{base}大学" if self.zh else f"University of {label}"
        return self._link(name, name, 0.2)

    def _f_hills(self, key: str, years: dict[int, int]) -> str:
        base = self.rng.choice(self.places)[2]
        return f"{base}丘陵" if self.zh else f"{base} Hills"

    def _f_range(self, key: str, years: dict[int, int]) -> str:
        base = self.rng.choice(self.mountains)[2]
        name = f"{base}山脉" if self.zh else f"{base} {self.rng.choice(['Mountains', 'Range'])}"
        return self._link(name, name, 0.3)

    def _f_company(self, key: str, years: dict[int, int]) -> str:
        base = self.rng.choice(self.places)[2]
        sep = "" if self.zh else " "
        return base + sep + self.rng.choice(self.v["company_types"])

    def _f_oldname(self, key: str, years: dict[int, int]) -> str:
        if self.zh:
            return "".join(self.rng.sample(self.d["chars"], 2))
        return self.rng.choice(self.d["onsets"]) + self.rng.choice(self.d["codas"])

    def _f_work(self, key: str, years: dict[int, int]) -> str:
        if self.zh:
            return self.rng.choice(self.v["work_title"])
        title = f"The {self.rng.choice(self.v['work_adj'])} {self.rng.choice(self.v['work_noun'])}"
        return f"''{title}''"

    def _f_book_title(self, key: str, years: dict[int, int]) -> str:
        work = self._f_work(key, years)
        return work.strip("'")

    def _f_adj(self, key: str, years: dict[int, int]) -> str:
        word = self.rng.choice(self.v["adj"])
        # Occasional emphasis, so italics also turn up mid-sentence.
        return f"''{word}''" if not self.zh and not self.plain and self.rng.random() < 0.04 else word

    def _f_image(self, key: str, years: dict[int, int]) -> str:
        view = self.rng.choice(self.v["views"])
        title = self.subj.title
        name = f"{title}{view}.jpg" if self.zh else f"{title} {view}.jpg"
        self.subj.images.append(name)
        return name

    def _f_extlink(self, key: str, years: dict[int, int]) -> str:
        return f"[{self._f_url(key, years)} {self.rng.choice(self.v['link_labels'])}]"

    def _f_url(self, key: str, years: dict[int, int]) -> str:
        host = self.rng.choice(["www.example.org", "archive.example.com", "www.example.net"])
        words = self.rng.sample(_EN["vocab"]["noun"], 2)
        return f"http://{host}/{'-'.join(words)}/{self.rng.randint(100, 99999)}.html"

    def _f_isbn(self, key: str, years: dict[int, int]) -> str:
        return f"978-{self.rng.randint(0, 1)}-{self.rng.randint(1000, 9999)}-{self.rng.randint(1000, 9999)}-{self.rng.randint(0, 9)}"

    def _f_doi(self, key: str, years: dict[int, int]) -> str:
        return (
            f"{self.rng.randint(1000, 9999)}/{self.rng.choice('abcdefghjk')}{self.rng.randint(10000, 99999)}"
        )

    # Years are ordered within a sentence: {year} < {year2} < {year3}.
    def _f_year(self, key: str, years: dict[int, int]) -> str:
        return str(self._year(int(key[4:] or 1), years))

    def _year(self, idx: int, years: dict[int, int]) -> int:
        if idx not in years:
            if idx == 1:
                lo, hi = 1650, 1985
                if self.subj is not None and self.subj.kind == "person":
                    # Events of a life fall within it.
                    lo, hi = int(self.subj.facts["byear"]) + 12, int(self.subj.facts["dyear"]) - 3
                years[idx] = self.rng.randint(lo, hi)
            else:
                years[idx] = min(2023, self._year(idx - 1, years) + self.rng.randint(2, 45))
        return years[idx]

    def _f_tagyear(self, key: str, years: dict[int, int]) -> str:
        return str(self.rng.randint(2010, 2023))

    def _f_month2digit(self, key: str, years: dict[int, int]) -> str:
        return f"{self.rng.randint(1, 12):02d}"

    def _f_day2digit(self, key: str, years: dict[int, int]) -> str:
        return f"{self.rng.randint(1, 28):02d}"

    def _f_pubyear(self, key: str, years: dict[int, int]) -> str:
        return str(self.rng.randint(1850, 2022))

    def _f_decade(self, key: str, years: dict[int, int]) -> str:
        decade = self.rng.randrange(1700, 1990, 10)
        return str(decade) if self.zh else f"{decade}s"

    def _f_century(self, key: str, years: dict[int, int]) -> str:
        c = self.rng.randint(15, 20)
        return str(c) if self.zh else f"{c}th"

    def _f_month(self, key: str, years: dict[int, int]) -> str:
        m = self.rng.randint(1, 12)
        return str(m) if self.zh else self.d["months"][m - 1]

    def _f_date(self, key: str, years: dict[int, int]) -> str:
        return self._format_date(
            self.rng.randint(1700, 2020), self.rng.randint(1, 12), self.rng.randint(1, 28)
        )

    def _f_access_date(self, key: str, years: dict[int, int]) -> str:
        return self._format_date(
            self.rng.randint(2008, 2023), self.rng.randint(1, 12), self.rng.randint(1, 28)
        )

    def _f_iso_date(self, key: str, years: dict[int, int]) -> str:
        return f"{self.rng.randint(2005, 2022)}-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"

    def _f_sigdate(self, key: str, years: dict[int, int]) -> str:
        day = _dt.date(self.rng.randint(2008, 2022), self.rng.randint(1, 12), self.rng.randint(1, 28))
        hh, mm = self.rng.randint(0, 23), self.rng.randint(0, 59)
        if self.zh:
            weekday = "一二三四五六日"[day.weekday()]
            return f"{day.year}年{day.month}月{day.day}日 ({weekday}) {hh:02d}:{mm:02d}"
        return f"{hh:02d}:{mm:02d}, {day.day} {self.d['months'][day.month - 1]} {day.year}"

    # Plain numbers.
    _RANGES = {
        "num": (2, 40),
        "hours": (2, 14),
        "age": (35, 95),
        "length": (20, 900),
        "height": (300, 4800),
        "rain": (300, 2600),
        "cm": (3, 90),
        "grams": (5, 900),
        "page": (3, 480),
    }

    def _number(self, key: str) -> str:
        lo, hi = self._RANGES[key]
        return self._int(self.rng.randint(lo, hi))

    def _f_num(self, key: str, years: dict[int, int]) -> str:
        return self._number("num")

    def _f_hours(self, key: str, years: dict[int, int]) -> str:
        return self._number("hours")

    def _f_length(self, key: str, years: dict[int, int]) -> str:
        # Used as "a {length}-kilometre river": skip numbers that would need "an".
        while True:
            n = str(self.rng.randint(*self._RANGES["length"]))
            if not (n.startswith("8") or n in ("11", "18")):
                return n

    def _f_height(self, key: str, years: dict[int, int]) -> str:
        return str(self.rng.randint(*self._RANGES["height"]))

    def _f_rain(self, key: str, years: dict[int, int]) -> str:
        return self._number("rain")

    def _f_cm(self, key: str, years: dict[int, int]) -> str:
        return self._number("cm")

    def _f_grams(self, key: str, years: dict[int, int]) -> str:
        return self._number("grams")

    def _f_page(self, key: str, years: dict[int, int]) -> str:
        return self._number("page")

    def _f_pages(self, key: str, years: dict[int, int]) -> str:
        first = self.rng.randint(1, 400)
        return f"{first}–{first + self.rng.randint(2, 40)}"

    def _f_big(self, key: str, years: dict[int, int]) -> str:
        return self._int(self.rng.choice([self.rng.randint(120, 9999), self.rng.randint(10000, 250000)]))

    def _f_pct(self, key: str, years: dict[int, int]) -> str:
        return f"{self.rng.uniform(1.5, 85):.1f}"

    def _f_decimal(self, key: str, years: dict[int, int]) -> str:
        return f"{self.rng.uniform(1.2, 40):.1f}"

    def _f_money(self, key: str, years: dict[int, int]) -> str:
        if self.zh:
            return str(self.rng.randint(100, 9000))
        return f"{self.rng.uniform(1.2, 95):.1f}"

    # Measurements, written the several ways articles write them.
    def _f_km(self, key: str, years: dict[int, int]) -> str:
        return self._measure(self.rng.randint(5, 900), "km", "mi", "公里")

    def _f_km_convert(self, key: str, years: dict[int, int]) -> str:
        return f"{{{{convert|{self.rng.randint(20, 900)}|km|mi|abbr=on}}}}"

    def _f_num_m(self, key: str, years: dict[int, int]) -> str:
        return self._measure(self.rng.randint(8, 4800), "m", "ft", "米")

    def _f_area(self, key: str, years: dict[int, int]) -> str:
        n = self.rng.randint(2, 3000)
        r = self.rng.random()
        if r < 0.3:
            return f"{{{{convert|{n}|km2|sqmi}}}}"
        if r < 0.7 or self.plain:
            return f"{self._int(n)}平方公里" if self.zh else f"{self._int(n)} km²"
        return f"{self._int(n)}&nbsp;km<sup>2</sup>"

    def _f_discharge(self, key: str, years: dict[int, int]) -> str:
        n = self.rng.randint(3, 900)
        r = self.rng.random()
        if r < 0.4:
            return f"{{{{convert|{n}|m3/s|cuft/s}}}}"
        return f"{n}立方米每秒" if self.zh and r < 0.7 else f"{n}&nbsp;m<sup>3</sup>/s"

    # -- sentences, paragraphs, sections -------------------------------------------

    def _templates_for(self, kind: str) -> list[str]:
        tags = ("any", _KIND_GROUP[kind], kind)
        out = []
        for tag, tmpl in self.d["templates"]:
            if tag in tags:
                # Kind-specific sentences are rarer in the list, so weigh them up.
                out.extend([tmpl] * (2 if tag == kind else 1))
        return out

    def _sentence(self, pool: list[str]) -> str:
        if self.zh and self.rng.random() < 0.04:
            tmpl = self.rng.choice(self.d["traditional"])
        else:
            # Deal templates like cards, so an article rarely repeats a sentence.
            if not self.deck:
                self.deck = self.rng.sample(pool, len(pool))
            tmpl = self.deck.pop()
        return _capitalize(self.fill(tmpl))

    def _citation(self) -> str:
        return self.fill(self.rng.choice(self.d["citations"]))

    def _ref(self, art: _ArticleState) -> str:
        """A footnote: a new (possibly named) ``<ref>`` or a reuse ``<ref name=... />``."""
        r = self.rng.random()
        if art.named_refs and r < 0.25:
            return f'<ref name="{self.rng.choice(art.named_refs)}" />'
        if r < 0.5:
            name = f"{self.rng.choice(_EN['last_names']).lower()}{len(art.named_refs) + 1}"
            art.named_refs.append(name)
            return f'<ref name="{name}">{self._citation()}</ref>'
        return f"<ref>{self._citation()}</ref>"

    def _after_sentence(self, art: _ArticleState) -> str:
        """Footnotes and inline maintenance templates that follow a sentence."""
        out = ""
        if art.want_notes and self.rng.random() < 0.07:
            out += f"{{{{efn|{self.fill(self.rng.choice(self.v['note_text']))}}}}}"
        if self.rng.random() < 0.22:
            out += self._ref(art)
        elif self.rng.random() < 0.02:
            out += self.fill(self.d["citation_needed"])
        return out

    def _paragraph(self, n: int, pool: list[str], art: _ArticleState, first: str | None = None) -> str:
        sentences = []
        for i in range(n):
            s = first if (i == 0 and first is not None) else self._sentence(pool)
            sentences.append(s + self._after_sentence(art))
        text = self.d["joiner"].join(sentences)
        if self.rng.random() < 0.06:
            comment = self.fill(self.rng.choice(self.v["comment"]))
            text = f"{comment}\n{text}" if self.rng.random() < 0.5 else f"{text} {comment}"
        return text

    def _image_line(self, force_prefix: str | None = None) -> str:
        prefix = force_prefix or self.rng.choice(["File", "File", "Image"])
        opts = self.rng.choice(["thumb", "thumb|right", "thumb|left|upright=1.2", "thumb|220px"])
        return f"[[{prefix}:{self.fill('{image}')}|{opts}|{self.fill(self.rng.choice(self.v['caption']))}]]"

    def _table(self, art: _ArticleState) -> str:
        t = self.d["tables"]
        rows: list[str] = []
        if self.subj.kind == "settlement":
            caption, headers = t["caption_pop"], t["headers_pop"]
            pop = self.rng.randint(300, 20000)
            for year in sorted(self.rng.sample(range(1850, 2021, 10), self.rng.randint(3, 6))):
                new = max(50, int(pop * self.rng.uniform(0.85, 1.5)))
                change = f"{(new - pop) / pop * 100:+.1f}%"
                pop = new
                rows.append(f"| {year} || {self._int(pop)} || {change}")
        else:
            caption, headers = t["caption_list"], t["headers_list"]
            for year in sorted(self.rng.sample(range(1700, 2021), self.rng.randint(3, 5))):
                note = self.fill(self.rng.choice(self.v["table_notes"]))
                rows.append(f"| {year} || {self.fill(self.rng.choice(t['event']))} || {note}")
        # Real tables carry footnotes and line breaks inside cells.
        rows[-1] += self._ref(art) if self.rng.random() < 0.5 else "<sup>[a]</sup>"
        if len(rows) > 2:
            rows[1] += "<br /><small>(revised)</small>" if not self.zh else "<br /><small>（修订）</small>"
        head = '! scope="col" | ' + " !! ".join(headers)
        body = "\n|-\n".join(rows)
        cls = self.rng.choice(
            ['class="wikitable"', 'class="wikitable sortable"', 'class="wikitable" style="text-align:right"']
        )
        return f"{{| {cls}\n|+ {caption}\n|-\n{head}\n|-\n{body}\n|}}"

    def _bullets(self) -> str:
        lines = [self.fill(self.rng.choice(self.v["list_intro"]))]
        for _ in range(self.rng.randint(3, 6)):
            lines.append("* " + _capitalize(self.fill(self.rng.choice(self.v["list_item"]))))
            if self.rng.random() < 0.15:
                lines.append("** " + _capitalize(self.fill(self.rng.choice(self.v["list_item"]))))
        return "\n".join(lines)

    def _heading(self, title: str, level: int) -> str:
        bars = "=" * level
        return f"{bars}{title}{bars}" if self.rng.random() < 0.2 else f"{bars} {title} {bars}"

    def _plan(self) -> tuple[int, list[list[int]]]:
        """Lead length and, per body section, its paragraphs' sentence counts."""
        rng = self.rng
        while True:
            lead = rng.randint(2, 4)
            sections = [
                [rng.randint(2, 6) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(2, 6))
            ]
            total = lead + sum(map(sum, sections))
            if _MIN_SENTENCES <= total <= _MAX_SENTENCES:
                return lead, sections

    # -- whole pages ------------------------------------------------------------

    def article(self, subj: _Subject, showcase: bool = False) -> str:
        """Full wikitext of an ordinary article.

        ``showcase`` forces every optional construct on, so even a one-article
        dump contains all the markup a cleaner must handle.
        """
        rng, d = self.rng, self.d
        self.subj = subj
        self.deck = []
        art = _ArticleState()

        def chance(p: float) -> bool:
            return showcase or rng.random() < p

        trailing = [
            k
            for k, p in (
                ("see_also", 0.5),
                ("notes", 0.15),
                ("references", 0.8),
                ("further", 0.3),
                ("external", 0.5),
            )
            if chance(p)
        ]
        art.want_notes = "notes" in trailing
        pool = self._templates_for(subj.kind)
        lead_n, plan = self._plan()

        top: list[str] = []
        if chance(0.5):
            top.append(f"{{{{Short description|{self.fill(d['short_desc'][subj.kind])}}}}}")
        if not self.zh and not subj.mdy and chance(0.25):
            top.append(f"{{{{Use dmy dates|date={rng.choice(d['months'])} {rng.randint(2015, 2023)}}}}}")
        if self.zh and chance(0.3):
            top.append("{{NoteTA\n|G1 = Geography\n}}")
        if subj.kind == "species" and not self.zh:
            top.append("{{Italic title}}")
        if chance(0.75):
            top.append(self._infobox(subj))
        if chance(0.1):
            top.append(self.fill(rng.choice(self.v["comment"])))

        lead_first = _capitalize(self.fill(rng.choice(d["leads"][subj.kind])))
        if showcase:
            # Guarantee a named <ref> with {{cite web}} and a later reuse of it.
            art.named_refs.append("showcase")
            cite = self.fill(d["citations"][0])
            lead_first += f'<ref name="showcase">{cite}</ref>'
        lead = self._paragraph(lead_n, pool, art, first=lead_first)
        if showcase:
            lead += '<ref name="showcase" />'
        if art.want_notes:
            lead += f"{{{{efn|{self.fill(rng.choice(self.v['note_text']))}}}}}"

        headings = rng.sample(d["headings"][subj.kind], len(plan))
        subj.headings = headings
        need_file, need_image = showcase, showcase
        need_table, need_list, need_ext = showcase, showcase, showcase
        sections: list[str] = []
        for heading, paragraphs in zip(headings, plan, strict=True):
            # Heading, hatnote and image sit on consecutive lines; blocks of
            # running text, lists and tables are separated by blank lines.
            head = [self._heading(heading, 2)]
            if rng.random() < 0.1:
                head.append(self.fill(rng.choice(d["hatnote"])))
            if need_file or need_image or rng.random() < 0.2:
                prefix = "File" if need_file else ("Image" if need_image else None)
                need_file = need_file and prefix != "File"
                need_image = need_image and prefix != "Image"
                head.append(self._image_line(prefix))
            split = len(paragraphs) >= 2 and rng.random() < 0.3
            cut = rng.randint(1, len(paragraphs) - 1) if split else len(paragraphs)
            blocks = [self._paragraph(n, pool, art) for n in paragraphs[:cut]]
            if need_ext:
                blocks[-1] += d["joiner"] + self.fill(d["extlink_sentence"])
                need_ext = False
            if split:
                sub = self._heading(rng.choice(d["subheadings"]), 3)
                blocks.append(sub + "\n" + self._paragraph(paragraphs[cut], pool, art))
                blocks.extend(self._paragraph(n, pool, art) for n in paragraphs[cut + 1 :])
            if need_list or rng.random() < 0.12:
                blocks.append(self._bullets())
                need_list = False
            if need_table or rng.random() < 0.1:
                blocks.append(self._table(art))
                need_table = False
            sections.append("\n".join(head) + "\n" + "\n\n".join(blocks))

        tail = [self._trailing(k, subj) for k in trailing]
        bottom = self._bottom(subj, showcase)
        return "".join(t + "\n" for t in top) + lead + "\n\n" + "\n\n".join(sections + tail) + "\n\n" + bottom

    def _infobox(self, subj: _Subject) -> str:
        name, fields = self.d["infobox"][subj.kind]
        width = max(len(k) for k, _ in fields)
        lines = [f"{{{{{name}"]
        for key, value in fields:
            lines.append(f"| {key.ljust(width)} = {self.fill(value)}")
        lines.append("}}")
        return "\n".join(lines)

    def _trailing(self, key: str, subj: _Subject) -> str:
        d, rng = self.d, self.rng
        head = self._heading(d["trailing"][key], 2)
        if key == "see_also":
            others = [a.title for a in self.articles if a is not subj]
            items = rng.sample(others, min(len(others), rng.randint(1, 3)))
            items.append(self.fill(d["see_also_extra"]))
            return head + "\n" + "\n".join(f"* [[{t}]]" for t in items)
        if key == "notes":
            return head + "\n{{notelist}}"
        if key == "references":
            return head + "\n" + rng.choice(d["reflists"])
        if key == "further":
            return (
                head + "\n" + "\n".join(self.fill(rng.choice(d["further"])) for _ in range(rng.randint(1, 3)))
            )
        lines = [self.fill(t) for t in rng.sample(d["external"], rng.randint(1, len(d["external"])))]
        if not any(line.startswith("* [") for line in lines):
            lines.insert(0, self.fill(d["external"][0]))
        return head + "\n" + "\n".join(lines)

    def _bottom(self, subj: _Subject, showcase: bool) -> str:
        """Stub notice, DEFAULTSORT and categories that end an article."""
        lines: list[str] = []
        country = self._country(subj.home)[0]
        stub = self.d["stub_suffix"].get(subj.kind)
        if stub and (showcase or self.rng.random() < 0.25):
            lines.append("{{" + f"{country}-{stub}-stub" + "}}")
        if subj.kind == "person":
            lines.append(f"{{{{DEFAULTSORT:{subj.facts['sortkey']}}}}}")
        cats = [self.fill(c) for c in self.d["categories"][subj.kind]]
        subj.categories = cats
        lines.extend(f"[[Category:{c}]]" for c in cats)
        return "\n".join(lines)

    def stub(self, subj: _Subject) -> str:
        self.subj = subj
        return self.fill(self.d["pages"]["stub"])

    def disambiguation(self, base: str, entries: list[_Subject]) -> str:
        pages = self.d["pages"]
        lines = [self.fill(pages["disambig_intro"], {"T": base}), ""]
        for subj in entries:
            self.subj = subj
            desc = self.fill(self.d["short_desc"][subj.kind])
            sep = "，" if self.zh else ", "
            lines.append(f"* [[{subj.title}]]{sep}{desc[0].lower() + desc[1:] if not self.zh else desc}")
        lines.append(self.fill(pages["disambig_other"], {"T": base}))
        lines += ["", pages["disambig_end"]]
        return "\n".join(lines)

    def redirect(self, target: _Subject) -> tuple[str, str]:
        """(redirect title, wikitext) pointing at ``target``."""
        pages, rng = self.d["pages"], self.rng
        title = self._redirect_title(target)
        anchor = f"#{target.headings[0]}" if target.headings and rng.random() < 0.2 else ""
        text = f"{rng.choice(pages['redirect_word'])} [[{target.title}{anchor}]]"
        if rng.random() < 0.6:
            text += "\n\n" + pages["redirect_tail"]
        return title, text

    def _redirect_title(self, subj: _Subject) -> str:
        b, country = subj.base, self._country(subj.home)[0]
        if self.zh:
            # zhwiki is full of redirects from Traditional-character titles.
            kind_word = {
                "river": "河流",
                "lake": "湖泊",
                "mountain": "山峰",
                "settlement": "城镇",
                "species": "生物",
                "invention": "机器",
                "organization": "组织",
                "battle": "战役",
            }.get(subj.kind) or subj.facts.get("profession", "人物")
            candidates = [
                "".join(self.d["s2t"].get(ch, ch) for ch in subj.title),
                f"{subj.title}（{kind_word}）",
            ]
        else:
            candidates = {
                "river": [f"River {b}", f"{b} river"],
                "lake": [f"{b} Lake", f"Lake {b} ({country})"],
                "mountain": [f"Mt. {b}", f"{b} Mountain"],
                "settlement": [f"{b} (town)", f"{b}, {country}"],
                "person": [
                    f"{subj.facts.get('first', '')[:1]}. {subj.short}",
                    f"{subj.short}, {subj.facts.get('first', '')}",
                ],
                "species": [subj.facts.get("common", "").capitalize(), f"{subj.facts.get('genus', b)}"],
                "invention": [subj.title.title(), f"{subj.title} ({country})"],
                "organization": [subj.facts.get("abbr", b), f"{subj.title} ({country})"],
                "battle": [subj.title.replace(" of ", " at "), f"{subj.title} ({country})"],
            }[subj.kind]
        candidates.append(f"{subj.title}（{country}）" if self.zh else f"{subj.title} ({country})")
        for cand in candidates:
            if cand and cand != subj.title and self._claim(cand):
                return cand
        for i in range(2, 1000):
            cand = f"{subj.title} ({i})"
            if self._claim(cand):
                return cand
        raise RuntimeError("no free redirect title")


def _capitalize(s: str) -> str:
    """Upper-case a sentence's first letter (templates may start with "it")."""
    return s[0].upper() + s[1:] if s and s[0].islower() else s


def _sha1_base36(text: str) -> str:
    """Revision checksum as MediaWiki writes it: SHA-1 in base 36, 31 digits."""
    n = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out.rjust(31, "0")


def _esc(s: str) -> str:
    # Dumps escape double quotes in text as well, so do the same.
    return escape(s, {'"': "&quot;"})


def _build_pages(gen: _Generator, num_articles: int) -> list[_Page]:
    """All pages of the dump, in no particular order yet."""
    rng = gen.rng
    gen._make_pools()

    # The first articles share one name, so that the disambiguation page lists
    # real articles (a river, a town and a mountain called "Varn").
    shared = gen._new_base()
    forced = ["river", "settlement", "mountain"][:num_articles]
    kinds = forced + rng.choices(
        list(_KIND_WEIGHTS), weights=list(_KIND_WEIGHTS.values()), k=num_articles - len(forced)
    )
    subjects = [
        gen._make_subject(kind, base=shared, comma_title=True) if i < len(forced) else gen._make_subject(kind)
        for i, kind in enumerate(kinds)
    ]
    stub_subj = gen._make_subject("settlement")
    # Link targets, "See also" entries, talk pages ... need at least one topic.
    gen.articles = subjects or [stub_subj]
    # Article topics become link targets of other articles' sentences.
    for s in subjects:
        entry = (s.title, s.short if s.kind == "settlement" else s.title, s.base)
        pool = {
            "settlement": gen.places,
            "river": gen.rivers,
            "lake": gen.lakes,
            "mountain": gen.mountains,
            "organization": gen.orgs,
        }.get(s.kind)
        if pool is not None:
            pool.append(entry)
        elif s.kind == "person":
            gen.people.append(s.title)

    pages = [_Page(s.title, 0, gen.article(s, showcase=(i == 0))) for i, s in enumerate(subjects)]

    # Special namespace-0 pages: empty, stub, disambiguation.
    empty_base = gen._new_base()
    empty_title = empty_base + "湾" if gen.zh else f"{empty_base} Cove"
    gen._claim(empty_title)
    pages.append(_Page(empty_title, 0, ""))
    pages.append(_Page(stub_subj.title, 0, gen.stub(stub_subj)))
    entries = [s for s in subjects if s.base == shared] or [stub_subj]
    disambig_title = shared if gen._claim(shared) else f"{shared} (disambiguation)"
    pages.append(_Page(disambig_title, 0, gen.disambiguation(shared, entries)))

    targets = gen.articles
    shuffled = rng.sample(targets, len(targets))
    for i in range(num_redirects(num_articles)):
        target = shuffled[i % len(shuffled)]
        title, text = gen.redirect(target)
        pages.append(_Page(title, 0, text, redirect=target.title))

    pages.extend(_other_namespace_pages(gen, targets))
    return pages


def _other_namespace_pages(gen: _Generator, subjects: list[_Subject]) -> list[_Page]:
    """Talk, User, Wikipedia, File, Template and Category pages."""
    rng, p = gen.rng, gen.d["pages"]
    out: list[_Page] = []
    shuffled = rng.sample(subjects, len(subjects))
    for i in range(OTHER_NAMESPACE_PAGES[1]):
        subj = gen.subj = shuffled[i % len(shuffled)]
        title = f"Talk:{subj.title}"
        if not gen._claim(title):  # fewer articles than talk pages: add an archive
            title = f"{title}/Archive {i}"
            gen._claim(title)
        out.append(_Page(title, 1, gen.fill(p["talk"])))

    for user in rng.sample(gen.d["usernames"], OTHER_NAMESPACE_PAGES[2]):
        gen.subj = rng.choice(subjects)
        out.append(_Page(f"User:{user}", 2, gen.fill(p["user"], {"user": user})))

    countries = rng.sample(gen.d["countries"], OTHER_NAMESPACE_PAGES[4])
    for country, _ in countries:
        gen.subj = rng.choice(subjects)
        name = f"Wikipedia:{country}专题" if gen.zh else f"Wikipedia:WikiProject {country}"
        out.append(_Page(name, 4, gen.fill(p["project"], {"home_plain": country})))

    with_images = [s for s in subjects if s.images] or subjects
    for subj in rng.sample(with_images, OTHER_NAMESPACE_PAGES[6]):
        gen.subj = subj
        image = subj.images[0] if subj.images else gen.fill("{image}")
        cat = subj.categories[0] if subj.categories else "Images"
        caption = gen.fill(rng.choice(gen.v["caption"]))
        text = gen.fill(p["file"], {"cat": cat, "caption_plain": _strip_links(caption)})
        out.append(_Page(f"File:{image}", 6, text))

    gen.subj = subjects[0]
    infobox_name = gen.d["infobox"][subjects[0].kind][0]
    tpl_titles = [f"Template:{infobox_name}"]
    stub_country = gen._country(subjects[0].home)[0]
    tpl_titles.append(f"Template:{stub_country}-geo-stub")
    out.append(_Page(tpl_titles[0], 10, p["infobox_template"]))
    out.append(
        _Page(
            tpl_titles[1],
            10,
            gen.fill(p["stub_template"], {"tpl_title": tpl_titles[1], "home_plain": stub_country}),
        )
    )

    seen: set[str] = set()
    cats = []
    for subj in subjects:
        for cat in subj.categories:
            if cat not in seen:
                seen.add(cat)
                cats.append((cat, subj))
    for country, _ in gen.d["countries"]:  # tiny dumps: fall back to country categories
        if len(cats) >= OTHER_NAMESPACE_PAGES[14]:
            break
        gen.subj = subjects[0]
        cat = gen.fill(p["parentcat"], {"home_plain": country})
        if cat not in seen:
            seen.add(cat)
            cats.append((cat, subjects[0]))
    for cat, subj in rng.sample(cats, OTHER_NAMESPACE_PAGES[14]):
        gen.subj = subj
        extra = {"cat": cat, "article": subj.title}
        extra["catdesc"] = gen.fill(p["catdesc"], extra)
        extra["parentcat"] = gen.fill(p["parentcat"])
        out.append(_Page(f"Category:{cat}", 14, gen.fill(p["category"], extra)))
    return out


def _strip_links(s: str) -> str:
    """``[[a|b]]`` -> ``b``, ``[[a]]`` -> ``a`` (for template parameters)."""
    return re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", s)


def _render(pages: list[_Page], gen: _Generator, lang: str) -> str:
    """The XML text of the dump: header, <siteinfo>, pages ordered by id."""
    rng, d = gen.rng, gen.d
    out = [
        f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{EXPORT_NS} http://www.mediawiki.org/xml/export-0.10.xsd" '
        f'version="0.10" xml:lang="{lang}">',
        "  <siteinfo>",
        "    <sitename>Wikipedia</sitename>",
        f"    <dbname>{d['dbname']}</dbname>",
        f"    <base>{_esc(d['base'])}</base>",
        "    <generator>MediaWiki 1.41.0-wmf.25</generator>",
        "    <case>first-letter</case>",
        "    <namespaces>",
    ]
    for key, name in _NAMESPACES:
        if name:
            out.append(f'      <namespace key="{key}" case="first-letter">{_esc(name)}</namespace>')
        else:
            out.append(f'      <namespace key="{key}" case="first-letter" />')
    out += ["    </namespaces>", "  </siteinfo>"]

    # Like a real dump, pages appear in page-id order with namespaces mixed, and
    # ids have gaps (deleted pages).
    order = list(pages)
    rng.shuffle(order)
    page_id = rng.randint(10, 40)
    used_revs: set[int] = set()
    start = _dt.datetime(2021, 1, 1, tzinfo=_dt.timezone.utc)
    for page in order:
        page_id += rng.randint(1, 40)
        rev = rng.randint(900_000_000, 1_190_000_000)
        while rev in used_revs:
            rev += 1
        used_revs.add(rev)
        stamp = start + _dt.timedelta(seconds=rng.randint(0, 3 * 365 * 86400))
        out += [
            "  <page>",
            f"    <title>{_esc(page.title)}</title>",
            f"    <ns>{page.ns}</ns>",
            f"    <id>{page_id}</id>",
        ]
        if page.redirect is not None:
            out.append(f'    <redirect title="{_esc(page.redirect)}" />')
        out += ["    <revision>", f"      <id>{rev}</id>"]
        if rng.random() < 0.9:
            out.append(f"      <parentid>{rev - rng.randint(1000, 50_000_000)}</parentid>")
        out.append(f"      <timestamp>{stamp.strftime('%Y-%m-%dT%H:%M:%SZ')}</timestamp>")
        out.append("      <contributor>")
        if rng.random() < 0.15:
            out.append(f"        <ip>192.0.2.{rng.randint(1, 254)}</ip>")
        else:
            out.append(f"        <username>{_esc(rng.choice(d['usernames']))}</username>")
            out.append(f"        <id>{rng.randint(1000, 45_000_000)}</id>")
        out.append("      </contributor>")
        if rng.random() < 0.3:
            out.append("      <minor />")
        comment = rng.choice(d["edit_comments"])
        if comment:
            out.append(f"      <comment>{_esc(comment)}</comment>")
        out += ["      <model>wikitext</model>", "      <format>text/x-wiki</format>"]
        size = len(page.text.encode("utf-8"))
        if page.text:
            out.append(f'      <text bytes="{size}" xml:space="preserve">{_esc(page.text)}</text>')
        else:
            out.append('      <text bytes="0" xml:space="preserve" />')
        out += [f"      <sha1>{_sha1_base36(page.text)}</sha1>", "    </revision>", "  </page>"]
    out.append("</mediawiki>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def generate_wiki_xml(num_articles: int = 60, seed: int = 0, language: str = "en") -> str:
    """Return the text of a synthetic MediaWiki XML dump (schema export-0.10).

    Args:
        num_articles: ordinary articles to write (>= 0). The dump also holds an
            empty article, a stub, a disambiguation page, ``num_redirects(n)``
            redirects and the pages of :data:`OTHER_NAMESPACE_PAGES`.
        seed: seed of the random generator; equal arguments give equal output.
        language: ``"en"`` (enwiki-like) or ``"zh"`` (zhwiki-like).
    """
    if language not in _LANG_DATA:
        raise ValueError(f"language must be one of {LANGUAGES}, not {language!r}")
    if num_articles < 0:
        raise ValueError("num_articles must be >= 0")
    gen = _Generator(_LANG_DATA[language], random.Random(f"{language}:{seed}"))
    pages = _build_pages(gen, num_articles)
    return _render(pages, gen, language)


def write_sample_dump(
    path: str | os.PathLike,
    num_articles: int = 60,
    seed: int = 0,
    language: str = "en",
    compress: bool | None = None,
) -> pathlib.Path:
    """Write :func:`generate_wiki_xml` output to ``path`` and return the path.

    The file is bz2-compressed when ``compress`` is true, or when it is None and
    the path ends with ``.bz2``. Missing parent directories are created.
    """
    out = pathlib.Path(path)
    if compress is None:
        compress = out.name.endswith(".bz2")
    data = generate_wiki_xml(num_articles, seed, language).encode("utf-8")
    if compress:
        data = bz2.compress(data, compresslevel=9)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: write a sample dump to OUT_PATH."""
    parser = argparse.ArgumentParser(
        prog="python -m data_prep.sample_corpus",
        description="Write a synthetic MediaWiki XML dump (no real Wikipedia text).",
    )
    parser.add_argument("out_path", metavar="OUT_PATH", help="output file; .bz2 suffix compresses")
    parser.add_argument("--articles", type=int, default=60, help="number of ordinary articles (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--language", choices=LANGUAGES, default="en", help="content language (default en)")
    args = parser.parse_args(argv)
    if args.articles < 0:
        parser.error("--articles must be >= 0")
    out = write_sample_dump(args.out_path, args.articles, args.seed, args.language)
    print(f"wrote {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
