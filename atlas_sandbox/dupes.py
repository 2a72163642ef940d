"""Duplicate content: one story under several URLs, on loopback (`atlas web --dupes`).

"Have I seen this?" has three answers (same URL, same content, similar content); this origin
gives every one of them a ground truth, plus the case that must not be answered "yes".

dupes.example.test  (the Coastline Courier, a small local paper)
  /                     an index page linking every page below
  /robots.txt           allows everything
  /news/<slug>          eight articles of handwritten multi-paragraph text (1,200+ characters
                        of main text each) inside the full chrome: masthead, nav, a "most
                        read" aside, a footer linking the print version
  /print/<slug>         the print twin of every /news/ page: no nav, no aside, other CSS
                        classes and wrappers, a "printed from" line; its extracted main text is
                        identical to the article's (one document, two URLs). The first four
                        carry <link rel=canonical> to their article, a claim content confirms;
                        the rest carry none, so content alone has to find them
  /live/<slug>-a, -b, -c (and -d for storm-warning)
                        three live stories, each under three or four URLs that differ only by
                        the "Updated HH:MM" line under the headline or by a related-coverage box
                        at the end of the story: -b differs from -a by the time alone, -c by
                        the box alone, -d by both. Near-duplicates: every one keeps its own text
  /news/<slug>-corrected
                        two corrected articles: council-budget-vote with a vote count changed in
                        one sentence and a correction note, museum-shipwreck-exhibit with one
                        sentence silently rewritten (a quote given to the wrong person). A few
                        percent of the text: close, but a correction must never merge with the
                        version it corrects. The budget one carries <link rel=canonical> to the
                        original (the CMS kept the old claim): a claim content refutes

Everything else answers 404; a query string is ignored, as most servers ignore parameters they
do not know. The content is fixed (it does not follow `atlas web --seed`); only absolute URLs
(canonical links, the "printed from" line, which extraction leaves out) carry the sandbox's
port. The corrected articles live at their own URLs because `atlas web` runs in a process of
its own and has no way to change a page in place between two crawl cycles.

Ground truth for tests: ``print_twins``, ``near_duplicate_groups``, ``corrected_pairs``,
``canonical_claims`` and ``expected_text`` (the main text a good extractor returns: headline,
timestamp line, paragraphs and subheadings, related box, correction note, one per line).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from urllib.parse import urlsplit

DUPES = "dupes.example.test"
DUPES_HOSTS: tuple[str, ...] = (DUPES,)
"""Duplicate-content origin hosts: map these to loopback in a crawl's `resolve`."""

SITE_NAME = "Coastline Courier"

Answer = tuple[int, dict[str, str], bytes]

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_ALLOW_ALL = b"User-agent: *\nAllow: /\n"
_NOT_FOUND = (
    b'<!DOCTYPE html>\n<html lang="en"><head><title>Not found</title></head>'
    b"<body><h1>404 Not Found</h1></body></html>\n"
)
_SUBHEAD_AT = 3  # the subheading goes before this paragraph (0-based), as papers break stories


@dataclass(frozen=True)
class Story:
    """One story's words: what an extractor should find whatever the chrome around it."""

    slug: str
    title: str
    author: str
    published: str  # ISO date
    subhead: str
    paragraphs: tuple[str, ...]


# ---------------------------------------------------------------------- the articles

ARTICLES: tuple[Story, ...] = (
    Story("harbour-electric-ferries", "Harbour approves four electric ferries", "Ada Lindqvist",
          "2024-03-12", "Charging at the quay", (
        "The harbour authority approved a plan on Tuesday to replace the ageing ferry fleet that "
        "links the mainland with the three outer islands, ending a decade of argument over cost "
        "and timing.",
        "Under the plan, four battery-electric vessels will enter service between 2027 and 2029, "
        "each carrying up to 240 passengers and 36 cars. The authority put the total cost at 118 "
        "million euros, most of it covered by a regional transport fund.",
        "Island residents have complained for years about cancellations. Last winter, 14 percent "
        "of scheduled crossings were cancelled, most of them because of mechanical faults rather "
        "than weather, according to figures the authority published in March.",
        "Shore charging stations will be built at both ends of the main route. Engineers expect "
        "a full charge to take about twenty minutes, short enough to fit inside the existing "
        "turnaround time at the quay.",
        "Not everyone welcomed the decision. The ferry workers' union said crews had not been "
        "consulted about new shift patterns, and a group of hauliers asked for a guarantee that "
        "freight capacity would not shrink during the transition.",
        "The first vessel is due to be ordered before the end of the year. The authority said "
        "the old ships would be sold rather than scrapped, and that the timetable would not "
        "change until all four new ferries were in service.",
    )),
    Story("council-budget-vote", "Council passes budget with 4.5 percent tax rise",
          "Bruno Okafor", "2024-02-27", "Where the money goes", (
        "Councillors approved next year's budget late on Monday after a six-hour meeting, "
        "agreeing to raise council tax by 4.5 percent while protecting spending on libraries "
        "and bus routes that had been marked for cuts in the first draft.",
        "The budget passed by 23 votes to 18. Two members of the governing group abstained, "
        "saying the rise would fall hardest on pensioners in the older terraces near the "
        "harbour, where many households already struggle with heating bills.",
        "The finance committee had warned in January of a gap of 9.6 million euros, driven "
        "mainly by the cost of care for older residents and by higher interest on loans taken "
        "out to rebuild the sea wall after the storms of 2022.",
        "Social care takes the largest share, at 41 percent of spending. Roads and transport "
        "receive 14 percent, schools 12 percent, and the remainder is divided between housing, "
        "parks, waste collection and the council's own administration.",
        "Opposition councillors proposed selling the old customs house on the quay to close "
        "part of the gap. The motion was defeated, although the leader of the council said a "
        "sale had not been ruled out for the following year.",
        "The new rate takes effect in April. Residents will receive their bills in March, "
        "together with a leaflet explaining how the money is spent and how to apply for the "
        "reductions available to low-income households.",
    )),
    Story("library-reopens", "Central library reopens after eighteen months", "Chen Wei",
          "2024-04-06", "A home for the archive", (
        "The central library on Chapel Street reopened on Saturday after an eighteen-month "
        "refurbishment, with a new reading room on the top floor, a children's section twice "
        "the size of the old one and, for the first time, opening hours on Sundays.",
        "Queues formed outside well before the doors opened at nine. By lunchtime more than "
        "1,200 people had come through, according to the librarians, who handed out new "
        "membership cards at a table set up beside the returns desk.",
        "The work cost 6.3 million euros and was paid for largely by a national fund for public "
        "buildings. The council added 800,000 euros to repair the roof, which had leaked into "
        "the local history collection during the winter of 2021.",
        "That collection, which includes parish records going back to 1740 and some 30,000 "
        "photographs of the harbour, now sits in a climate-controlled room in the basement. "
        "Visitors can book an hour with an archivist through the library's website.",
        "The refurbishment also removed the steps at the main entrance. A ramp and a lift now "
        "reach every floor, answering a complaint that disability groups had raised with the "
        "council for the better part of twenty years.",
        "Staff said the busiest part of the building on the first day was not the new reading "
        "room but the ground floor, where volunteers were running a repair cafe for broken "
        "lamps, radios and bicycles.",
    )),
    Story("rail-summer-works", "Coast line to close for six weeks of viaduct works",
          "Dolores Ibarra", "2024-05-02", "Why now", (
        "The coastal railway line between Port Aldrin and Westmere will close for six weeks "
        "this summer while engineers replace a nineteenth-century viaduct and renew almost four "
        "kilometres of track along the cliffs.",
        "Replacement buses will run every twenty minutes during the day and hourly in the "
        "evening. The rail operator said journeys would take around 25 minutes longer, and it "
        "advised passengers with bicycles to travel outside the morning peak.",
        "The viaduct at Kell Bay has been under a speed restriction since 2019, when inspectors "
        "found cracks in two of its stone piers. Trains have been crossing it at walking pace, "
        "which has added minutes to every timetable on the line.",
        "The operator chose the school holidays because fewer people commute, but hoteliers in "
        "Westmere said the timing could hardly be worse. July and August bring in more than half "
        "of their annual trade, much of it from visitors arriving by train.",
        "To soften the blow, the operator will sell a summer pass covering the buses and all "
        "connecting trains at the price of an ordinary weekly ticket. Tourist offices in both "
        "towns will carry printed timetables from the start of June.",
        "If the work finishes on schedule, the line will reopen on the last Monday of August, "
        "and the speed limit on the viaduct will be lifted, cutting about seven minutes from "
        "the end-to-end journey.",
    )),
    Story("fishing-quota-dispute", "North coast crews tie up boats over quota cuts",
          "Emil Novak", "2024-01-18", "A question of who fishes", (
        "Fishing crews from the three harbours on the north coast tied up their boats for a day "
        "on Thursday in protest against new quotas for cod and haddock, which they say will "
        "make it impossible for smaller vessels to cover their costs.",
        "The quotas, agreed in Brussels last month, cut the catch allowed for cod in the "
        "northern grounds by 22 percent. Scientists advising the negotiators said stocks had "
        "fallen for four years in a row and needed time to recover.",
        "Skippers accept that stocks are under pressure but argue that the cuts fall unevenly. "
        "Large trawlers can move to other grounds and other species, they say, while a family "
        "boat working out of a small harbour cannot.",
        "The fishermen's association wants part of the national quota reserved for boats under "
        "twelve metres. A similar scheme already exists in two neighbouring countries, where it "
        "has kept small harbours working through earlier cuts.",
        "The fisheries minister said she understood the anger but had no room to reopen the "
        "agreement. She offered to meet the association next week to discuss compensation for "
        "crews who lose days at sea this year.",
        "On the quay at Breck, the boats stayed tied up until evening. Several skippers said "
        "they would go out again on Friday, because the weather forecast for the weekend was "
        "poor and the price of fuel has risen again.",
    )),
    Story("school-meals-trial", "Six primary schools to trial free lunches for all",
          "Farah Haddad", "2024-06-11", "Measuring the effect", (
        "Free lunches will be offered to every pupil at six primary schools in the district "
        "from September, in a two-year trial that the education department hopes will show "
        "whether universal school meals improve attendance and concentration.",
        "The trial will cover about 2,100 children. Schools were chosen to include both town "
        "and village schools, and at least one where fewer than a tenth of pupils currently "
        "qualify for free meals under the income test.",
        "Head teachers involved in the planning said the income test leaves out many families "
        "who are only just above the threshold. Some parents, they said, send children with a "
        "packed lunch that is little more than a slice of bread.",
        "Researchers from the regional university will compare attendance, reading scores and "
        "visits to the school nurse with a matched group of schools that are not in the trial. "
        "Their first report is due eighteen months after the start.",
        "Kitchens at two of the schools need new equipment before they can cook for every "
        "pupil. Until that is installed, meals will be prepared at a nearby secondary school "
        "and delivered in heated boxes each morning.",
        "The department has set aside 3.4 million euros for the trial. If the results are good, "
        "officials said, the scheme could be extended to all primary schools in the district "
        "from 2027, subject to the budget.",
    )),
    Story("storm-sea-wall", "Engineers survey sea wall after weekend storm", "Gustav Berg",
          "2024-10-28", "Repairs before winter", (
        "Engineers have begun a survey of the sea wall along the promenade after the weekend's "
        "storm lifted paving stones, flooded the lower end of Marine Parade and left a crack "
        "several metres long in the wall below the bandstand.",
        "Waves overtopped the wall for about three hours on Saturday night, around the time of "
        "high tide. Residents of fourteen houses were moved to a school hall, and most were "
        "allowed home on Sunday afternoon once the water had drained.",
        "The wall was raised and strengthened after the storms of 2022 at a cost of 27 million "
        "euros. Council engineers said the new section had done its job, and that the damage "
        "was concentrated on an older stretch that was not part of that work.",
        "The survey will use drones and divers to look at the foundations, which cannot be seen "
        "at low tide. The council expects to know by the end of the month whether the cracked "
        "section can be repaired or must be rebuilt.",
        "Shop owners on the promenade said the storm had cost them a weekend of trade at the "
        "start of the half-term holiday. Several asked the council to clear the sand and "
        "shingle from the road faster than it managed after the last storm.",
        "The weather service expects another deep depression to cross the coast late next "
        "week. The council has placed sandbags at the lower end of Marine Parade and asked "
        "residents there to sign up for flood warnings by text message.",
    )),
    Story("museum-shipwreck-exhibit", "Museum tells the story of the Aurora", "Hana Kobayashi",
          "2024-07-19", "Found by volunteers", (
        "The maritime museum opened an exhibition on Friday about the Aurora, a cargo ship that "
        "sank off the headland in 1893 with the loss of nineteen crew, and whose wreck was "
        "identified by divers only three years ago.",
        "The centrepiece is the ship's bell, raised last summer and cleaned over many months by "
        "conservators at the national museum. It still carries the name of the yard in Glasgow "
        "where the ship was built in 1881.",
        "Alongside it are a compass, pieces of the cargo of roof slates, and letters written by "
        "the second mate to his sister in the weeks before the voyage. The letters were lent to "
        "the museum by his great-great-niece, who lives in the town.",
        "The wreck was found by a club of amateur divers who had spent eleven seasons searching "
        "the seabed with a borrowed sonar. Their leader, Maren Holt, said the moment the name "
        "appeared on the bell was the best of her life.",
        "The museum worked with the divers to make a film of the wreck as it lies today, broken "
        "in two on a sandy bottom at a depth of thirty-four metres. The film runs on a loop in "
        "a darkened room at the end of the exhibition.",
        "The exhibition is free and runs until the end of October. The museum will hold a short "
        "ceremony on the anniversary of the sinking in November, when the names of the crew "
        "will be read aloud on the quay.",
    )),
)  # fmt: skip
"""The eight /news/ articles; each has a /print/ twin."""

CANONICAL_PRINTS: tuple[str, ...] = tuple(story.slug for story in ARTICLES[:4])
"""Articles whose print twin claims ``<link rel=canonical>`` to the article."""


@dataclass(frozen=True)
class Correction:
    """A corrected version of an article at /news/<slug>-corrected."""

    slug: str  # the article it corrects
    edits: tuple[tuple[str, str], ...]  # (as first published, as corrected), each in one paragraph
    note: str | None  # the correction note appended to the story, if the paper printed one
    canonical_to_original: bool  # whether the corrected page claims the original as canonical


# Each correction changes a few facts in different sentences (a few percent of the characters).
# Scattered edits touch more word shingles than the one-token "Updated" line or the five-word
# related box, so a similarity threshold can keep the live variants together and the
# corrections apart (tests/engine/test_sandbox_dupes.py measures the gap).
CORRECTIONS: tuple[Correction, ...] = (
    Correction(
        "council-budget-vote",
        (
            ("by 23 votes to 18. Two members of the governing group abstained,",
             "by 21 votes to 20. Two members of the governing group voted against it,"),
            ("at 41 percent of spending", "at 44 percent of spending"),
        ),
        "Correction: this article first gave the result as 23 votes to 18.",
        canonical_to_original=True,
    ),
    Correction(
        "museum-shipwreck-exhibit",
        (
            ("Their leader, Maren Holt, said", "The club's secretary, Jonas Eide, said"),
            ("the best of her life", "the best of his life"),
            ("at a depth of thirty-four metres", "at a depth of forty-three metres"),
        ),
        None,  # fixed silently, as many sites do
        canonical_to_original=False,
    ),
)  # fmt: skip


# ---------------------------------------------------------------------- the live stories


@dataclass(frozen=True)
class Related:
    """The related-coverage box some live variants carry: one line, "Related: <headline>"."""

    slug: str  # the /news/ article it links
    headline: str  # the link's words, kept short as such boxes are


@dataclass(frozen=True)
class LiveVariant:
    """One URL of a live story: /live/<slug>-<suffix>."""

    suffix: str
    updated: str  # HH:MM on the "Updated" line
    related: bool  # whether the related-coverage box is shown


LIVE_STORIES: tuple[tuple[Story, Related], ...] = (
    (Story("storm-warning", "Storm Ilse: live updates", "Ines Duarte", "2024-10-26",
           "Schools and services", (
        "A severe weather warning is in force for the whole coast until six o'clock tomorrow "
        "morning. The weather service expects gusts of up to 120 kilometres an hour on exposed "
        "headlands and waves of more than eight metres offshore.",
        "The harbour master has closed the port to all traffic. Ferries to the islands are "
        "cancelled for the rest of the day, and the operator says it will decide on tomorrow's "
        "first sailing at seven o'clock in the morning.",
        "Police have closed the coast road between Breck and the lighthouse after several trees "
        "came down near the golf course. Drivers are asked to use the inland route through "
        "Carrow, which adds about twenty minutes to the journey.",
        "All schools in the district will close at midday so that children can be home before "
        "the worst of the wind arrives. Bin collections for the afternoon have been postponed "
        "to Saturday, and the recycling centre is closed.",
        "The power company says around 3,000 homes are without electricity, most of them in the "
        "villages along the north shore. Engineers are waiting for the wind to drop before they "
        "climb poles, and some homes may be cut off overnight.",
        "The council has opened the sports hall on Mill Lane as a rest centre for anyone who "
        "needs to leave their home. Staff there have blankets, hot drinks and phone chargers, "
        "and pets are welcome if they are kept on a lead.",
    )), Related("storm-sea-wall", "Sea wall survey begins")),
    (Story("harbour-marathon", "Harbour Marathon: follow the race", "Jonah Whitfield",
           "2024-09-15", "Roads and buses", (
        "More than 4,000 runners set off from the promenade at nine o'clock this morning in the "
        "twelfth Harbour Marathon, under a grey sky with a light wind from the west that "
        "organisers described as close to ideal for fast times.",
        "The leading group of six men passed the halfway point at the lighthouse in one hour "
        "and six minutes. Last year's winner, Tomas Lind, is among them, running comfortably "
        "and taking a drink at every station.",
        "In the women's race, Aino Korhonen has opened a gap of nearly a minute over the "
        "chasing pack. She has not won here before, but she finished second in each of the last "
        "two years and has clearly decided to go early.",
        "The coast road remains closed between the harbour and the lighthouse until three "
        "o'clock. Buses on routes 4 and 7 are diverted through the town centre, and the car "
        "park at the leisure centre is reserved for race traffic.",
        "First aid teams have treated a handful of runners for cramp and blisters, but the "
        "organisers report no serious incidents so far. Water stations every five kilometres "
        "are well stocked, and the last one has added orange slices.",
        "Crowds are thickest on the hill up to the old fort, where a brass band has been "
        "playing since eight. Runners who pass there have a little more than six kilometres to "
        "go, almost all of it downhill or flat along the sea.",
    )), Related("rail-summer-works", "Coast line summer closure")),
    (Story("harbour-ward-count", "Harbour ward by-election: the count", "Kaia Solberg",
           "2024-11-07", "What is at stake", (
        "Counting is under way at the town hall in the by-election for the Harbour ward, called "
        "after the death in January of the long-serving councillor Edith Marr. Ballot boxes "
        "from all five polling stations arrived before eleven.",
        "Turnout was 38 percent, higher than at the last by-election in the ward but well below "
        "the figure at the general council election two years ago. Postal votes made up almost "
        "a third of the ballots returned.",
        "Four candidates are standing. Officials said the result is likely to be declared "
        "shortly after one o'clock in the morning, once the ballot papers have been verified "
        "against the numbers issued at each polling station.",
        "The governing group holds its majority on the council by a single seat, so the result "
        "will decide whether it can pass its plans for the harbour without help. Both main "
        "groups spent heavily on leaflets in the final week.",
        "The main issue on the doorstep, candidates say, has been the future of the old fish "
        "market, which the council wants to turn into flats and a food hall. Traders who still "
        "rent stalls there have campaigned against the plan.",
        "Agents for the candidates have been watching the sorting closely. One asked for a "
        "small bundle of ballots to be checked again, which is routine at this stage and does "
        "not mean a recount has been requested.",
    )), Related("council-budget-vote", "How the council voted")),
)  # fmt: skip
"""The live stories and the related box their -c (and -d) variants carry."""

LIVE_VARIANTS: tuple[LiveVariant, ...] = (
    LiveVariant("a", "10:42", related=False),
    LiveVariant("b", "11:15", related=False),  # -a with another time
    LiveVariant("c", "10:42", related=True),  # -a with the box
)
EXTRA_LIVE_VARIANT = LiveVariant("d", "12:03", related=True)  # both at once
"""A fourth variant, served for the first live story only (groups need not be the same size)."""


def _variants(index: int) -> tuple[LiveVariant, ...]:
    return LIVE_VARIANTS + ((EXTRA_LIVE_VARIANT,) if index == 0 else ())


# ---------------------------------------------------------------------- the pages


@dataclass(frozen=True)
class _Page:
    kind: str  # "news" | "print" | "live"
    story: Story
    blocks: tuple[tuple[str, str], ...]  # (tag, text) of the main text in document order
    related: Related | None = None
    note: str | None = None
    canonical: str | None = None  # path the page claims as canonical
    twin: str | None = None  # the /print/ path of a /news/ page, and the reverse


def _story_blocks(story: Story, paragraphs: tuple[str, ...]) -> list[tuple[str, str]]:
    blocks = [("h1", story.title)]
    for i, text in enumerate(paragraphs):
        if i == _SUBHEAD_AT:
            blocks.append(("h2", story.subhead))
        blocks.append(("p", text))
    return blocks


def _corrected(story: Story, fix: Correction) -> tuple[str, ...]:
    paragraphs = list(story.paragraphs)
    for wrong, right in fix.edits:
        hits = [i for i, p in enumerate(paragraphs) if p.count(wrong) == 1]
        if len(hits) != 1:  # a data error: fail on import, never serve an uncorrected copy
            raise ValueError(f"{story.slug}: {wrong!r} must occur once in exactly one paragraph")
        paragraphs[hits[0]] = paragraphs[hits[0]].replace(wrong, right)
    return tuple(paragraphs)


def _build_pages() -> dict[str, _Page]:
    pages: dict[str, _Page] = {}
    by_slug = {story.slug: story for story in ARTICLES}
    news: list[tuple[str, _Page]] = []
    for story in ARTICLES:
        blocks = tuple(_story_blocks(story, story.paragraphs))
        news.append((story.slug, _Page("news", story, blocks)))
    for fix in CORRECTIONS:
        story = by_slug[fix.slug]
        blocks = tuple(_story_blocks(story, _corrected(story, fix)))
        canonical = f"/news/{fix.slug}" if fix.canonical_to_original else None
        page = _Page("news", story, blocks, note=fix.note, canonical=canonical)
        news.append((f"{fix.slug}-corrected", page))
    for slug, page in news:
        news_path, print_path = f"/news/{slug}", f"/print/{slug}"
        pages[news_path] = _Page(page.kind, page.story, page.blocks, note=page.note,
                                 canonical=page.canonical, twin=print_path)  # fmt: skip
        canonical = news_path if slug in CANONICAL_PRINTS else None
        pages[print_path] = _Page("print", page.story, page.blocks, note=page.note,
                                  canonical=canonical, twin=news_path)  # fmt: skip
    for index, (story, related) in enumerate(LIVE_STORIES):
        for variant in _variants(index):
            live = _story_blocks(story, story.paragraphs)
            # The time goes under the headline, where live pages put it.
            live.insert(1, ("p", f"Updated {variant.updated}"))
            pages[f"/live/{story.slug}-{variant.suffix}"] = _Page(
                "live", story, tuple(live), related=related if variant.related else None
            )
    return pages


_PAGES = _build_pages()


# ---------------------------------------------------------------------- ground truth


def url(path: str, port: int) -> str:
    """``http://dupes.example.test:PORT/path``."""
    return f"http://{DUPES}:{port}{path}"


def seed_urls(port: int) -> list[str]:
    """The index page, which links every page."""
    return [url("/", port)]


def page_urls(port: int) -> list[str]:
    """Every page the origin serves besides the index and robots.txt, in index order."""
    return [url(path, port) for path in _PAGES]


def print_twins(port: int) -> list[tuple[str, str]]:
    """(article URL, print URL) of every /news/ page, the corrected ones included: each pair has
    identical main text, so it is one document with two URL mappings."""
    return [
        (url(path, port), url(page.twin, port))
        for path, page in _PAGES.items()
        if page.kind == "news" and page.twin is not None
    ]


def near_duplicate_groups(port: int) -> list[list[str]]:
    """The live stories' URLs, one group per story: texts differing only by the "Updated" line
    or the related box. Same cluster, each URL its own document."""
    return [
        [url(f"/live/{story.slug}-{v.suffix}", port) for v in _variants(i)]
        for i, (story, _) in enumerate(LIVE_STORIES)
    ]


def corrected_pairs(port: int) -> list[tuple[str, str]]:
    """(original, corrected) article URLs: close texts that must never be merged."""
    return [
        (url(f"/news/{fix.slug}", port), url(f"/news/{fix.slug}-corrected", port))
        for fix in CORRECTIONS
    ]


@dataclass(frozen=True)
class CanonicalClaim:
    """A page's ``<link rel=canonical>`` and whether content backs it."""

    page: str
    target: str
    confirmed: bool  # the two pages' main texts are identical


def canonical_claims(port: int) -> list[CanonicalClaim]:
    """Every canonical link the origin writes: print twins claiming their article (confirmed)
    and a corrected article claiming its original (refuted by its text)."""
    claims = []
    for path, page in _PAGES.items():
        if page.canonical is not None:
            confirmed = expected_text(path) == expected_text(page.canonical)
            claims.append(CanonicalClaim(url(path, port), url(page.canonical, port), confirmed))
    return claims


def _path_of(target: str) -> str:
    parts = urlsplit(target)
    return parts.path if parts.scheme else target.partition("?")[0]


def expected_text(target: str) -> str:
    """The main text of a page (absolute URL or path) as a good extractor returns it: headline,
    "Updated" line, paragraphs and subheadings, related box, correction note, one per line.

    KeyError for anything but a /news/, /print/ or /live/ page."""
    page = _PAGES[_path_of(target)]
    lines = [text for _, text in page.blocks]
    if page.related is not None:
        lines.append(f"Related: {page.related.headline}")
    if page.note is not None:
        lines.append(page.note)
    return "\n".join(lines)


# ---------------------------------------------------------------------- rendering


def _head(title: str, page: _Page, port: int, extra: str = "") -> list[str]:
    story = page.story
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f'<meta name="author" content="{escape(story.author)}">',
        f'<meta property="article:published_time" content="{story.published}">',
    ]
    if page.canonical is not None:
        head.append(f'<link rel="canonical" href="{escape(url(page.canonical, port))}">')
    return head + ([extra] if extra else []) + ["</head>"]


def _main_blocks(page: _Page, para_class: str, note_class: str) -> list[str]:
    """The main text's markup after the headline (the caller places the h1)."""
    out = []
    for tag, text in page.blocks[1:]:
        cls = f' class="{para_class}"' if tag == "p" and para_class else ""
        out.append(f"<{tag}{cls}>{escape(text)}</{tag}>")
    if page.related is not None:
        rel = page.related
        # Not class="related...": extractors drop such boxes as boilerplate, and the box has to
        # reach the document for the -c variant to differ from -a at all.
        link = f'<a href="/news/{rel.slug}">{escape(rel.headline)}</a>'
        out.append(f'<section class="more-coverage"><p>Related: {link}</p></section>')
    if page.note is not None:
        out.append(f'<p class="{note_class}"><em>{escape(page.note)}</em></p>')
    return out


def _render_full(path: str, page: _Page, port: int) -> bytes:
    """A /news/ or /live/ page inside the paper's full chrome."""
    story = page.story
    most_read = [s for s in ARTICLES if s.slug != story.slug][:3]
    byline = f"By {story.author}, {story.published}"
    lines = [
        *_head(f"{story.title} | {SITE_NAME}", page, port),
        '<body class="article-page">',
        '<header class="masthead">',
        f'<a class="logo" href="/">{SITE_NAME}</a>',
        '<nav class="site-nav" aria-label="Sections"><ul>',
        '<li><a href="/">Home</a></li>',
        f'<li><a href="/news/{ARTICLES[0].slug}">Latest</a></li>',
        f'<li><a href="/live/{LIVE_STORIES[0][0].slug}-a">Live</a></li>',
        "</ul></nav>",
        "</header>",
        '<main class="content">',
        '<article class="story">',
        f'<h1 class="headline">{escape(story.title)}</h1>',
        f'<p class="byline">{escape(byline)}</p>',
        '<div class="story-body">',
        *_main_blocks(page, "", "correction-note"),
        "</div>",
        "</article>",
        '<aside class="most-read"><h2>Most read</h2><ul>',
        *(f'<li><a href="/news/{s.slug}">{escape(s.title)}</a></li>' for s in most_read),
        "</ul></aside>",
        "</main>",
        '<footer class="site-footer">',
    ]
    if page.twin is not None:
        lines.append(f'<p><a href="{page.twin}">Print this story</a></p>')
    lines += [
        f"<p>&copy; 2024 {SITE_NAME}. All rights reserved.</p>",
        "</footer>",
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(lines).encode()


def _render_print(path: str, page: _Page, port: int) -> bytes:
    """A /print/ page: the same words in other wrappers and classes, no navigation at all."""
    story = page.story
    style = "<style>body{font-family:Georgia,serif;max-width:40em}.pr-nav{display:none}</style>"
    source = url(page.twin or path, port)
    lines = [
        *_head(f"{story.title} (print version)", page, port, style),
        '<body class="print-view" onload="window.print()">',
        '<div id="print-wrapper">',
        f'<div class="pr-masthead">{SITE_NAME} &middot; printer-friendly version</div>',
        '<article class="printable">',
        f'<h1 class="pr-title">{escape(story.title)}</h1>',
        f'<div class="pr-meta">{escape(story.author)} &middot; {story.published}</div>',
        '<section class="pr-text">',
        *_main_blocks(page, "pr-para", "pr-note"),
        "</section>",
        "</article>",
        f'<div class="pr-source">Printed from {escape(source)}</div>',
        "</div>",
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(lines).encode()


def _render_index() -> bytes:
    items = []
    for path, page in _PAGES.items():
        label = page.story.title
        if page.kind == "print":
            label += " (print)"
        elif path.endswith("-corrected"):
            label += " (corrected)"
        elif page.kind == "live":
            label += f" ({path.rsplit('-', 1)[1]})"
        items.append(f'<li><a href="{path}">{escape(label)}</a></li>')
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{SITE_NAME}'
        f"</title></head>\n<body><h1>{SITE_NAME}</h1>\n<p>Every story, every version.</p>\n"
        "<ul>\n" + "\n".join(items) + "\n</ul>\n</body></html>\n"
    ).encode()


class Dupes:
    """Answers for the duplicate-content origin; built once per server."""

    def __init__(self) -> None:
        self._rendered: dict[tuple[str, int], bytes] = {}  # ~40 small pages: keep them all
        self._index = _render_index()

    @staticmethod
    def serves(host: str) -> bool:
        """Whether ``host`` (lowercase, no port) is the duplicate-content origin."""
        return host in DUPES_HOSTS

    def answer(self, host: str, path_qs: str, port: int) -> Answer:
        """The answer to a GET or HEAD of ``path_qs`` on ``host``."""
        path = path_qs.partition("?")[0]
        if path == "/robots.txt":
            return 200, {"Content-Type": _TEXT}, _ALLOW_ALL
        if path == "/":
            return 200, {"Content-Type": _HTML}, self._index
        page = _PAGES.get(path)
        if page is None:
            return 404, {"Content-Type": _HTML}, _NOT_FOUND
        body = self._rendered.get((path, port))
        if body is None:
            render = _render_print if page.kind == "print" else _render_full
            body = self._rendered[(path, port)] = render(path, page, port)
        return 200, {"Content-Type": _HTML}, body
