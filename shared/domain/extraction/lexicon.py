"""Small English lexicons for the rule-based extractor (lower-case)."""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


TITLES = _words("mr mrs ms miss dr prof sir madam lord lady st rev capt col gen sgt mme mlle")
ABBREVIATED_TITLES = _words("mr mrs ms dr prof st rev capt col gen sgt mme mlle")
# capitalised single words with these endings are usually adjectives (Christian, Welsh, Chinese)
ADJECTIVE_SUFFIXES = ("ian", "ish", "ese", "ic")

_FUNCTION_WORDS = _words(
    """
    a an the and or but nor so yet for of in on at to from by with without within into onto upon
    about above across after against along amid among around as before behind below beneath beside
    besides between beyond down during except inside near off out outside over since than
    through throughout till toward towards under underneath until unto up via whether while
    i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves one ones
    this that these those who whom whose which what whatever whoever whichever where wherever when
    whenever why how there here then thus hence therefore however although though because if unless
    else also too very just only even still already again ever never always often sometimes soon
    now once twice all any both each either neither every few many more most much no none not
    other others another same such some several own enough less least quite rather somewhat
    be am is are was were been being have has had having do does did doing done
    will would shall should can could may might must ought let lets
    say says said tell told go goes went gone come comes came get gets got make makes made
    take takes took give gives gave see sees saw seen know knows knew known think thought
    look looked looks seem seemed seems find found keep kept put set want wanted like liked
    stood sat ran spoke felt held left began brought heard stopped became turned replied cried
    yes yeah oh ah aye alas well why hey hello hullo nay indeed upon whilst amongst
    mrs mr ms dr st sir madam
    first second third last next old good little long own right big high small large
    zero two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty
    hundred thousand million billion hallo halloa hurrah hush ha ho bah humbug
    monday tuesday wednesday thursday friday saturday sunday
    january february march april june july august september october november december
    chapter stave part section page volume book illustration figure table note
    thing things way ways time times something nothing anything everything someone anyone
    nobody everybody somebody anybody man men woman women people day days year years
    """
)

STOPWORDS = _FUNCTION_WORDS | TITLES

CONNECTORS = _words("of the de la le du van von der den da di del y")

SPEECH_VERBS = _words(
    """said says cried replied returned asked exclaimed answered observed whispered continued added
    shouted muttered rejoined retorted repeated inquired enquired remarked pursued resumed"""
)

NOUN_ING = _words(
    """thing nothing something anything everything evening morning king ring wing spring string
    building feeling meeting wedding clothing ceiling pudding shilling farthing sibling darling
    blessing offering dwelling painting drawing learning understanding beginning ending opening
    reading writing warning training funding marketing engineering housing banking lightning"""
)

ORG_WORDS = _words(
    """company co corp corporation inc ltd llc plc bank university college school society
    association foundation institute institution council committee agency department ministry
    office board union party church parliament congress senate court firm group team club
    commission authority bureau service services army navy police project archive press"""
)

GEO_WORDS = _words(
    """street st road lane avenue square city town village county river lake sea ocean mountain
    mount hill valley island bay coast kingdom empire republic province state states country
    bridge park market place exchange harbour harbor port moor forest desert"""
)

GEO_SUFFIXES = ("shire", "land", "ville", "burgh", "borough", "chester", "mouth", "pool", "grad", "stan")

GEO_NAMES = _words(
    """london paris england france europe america britain scotland ireland wales germany italy
    spain rome berlin vienna dublin edinburgh boston chicago philadelphia washington india china
    japan russia africa asia australia canada mexico egypt greece athens madrid lisbon moscow
    amsterdam brussels geneva zurich tokyo beijing delhi cairo sydney toronto"""
) | {"new york", "united states", "united kingdom", "los angeles", "san francisco"}

EVENT_WORDS = _words(
    """christmas easter war battle revolution festival conference summit election olympics
    feast holiday holidays eve wedding funeral ceremony treaty crisis"""
)
