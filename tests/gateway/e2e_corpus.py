"""The end-to-end tests' corpora and questions (``tests/gateway/test_gateway_e2e*.py``)."""

from __future__ import annotations

from tests.conftest import SAMPLE

MODES = ["local", "global", "naive", "hybrid", "causal", "graph"]
QUESTIONS = {
    "local": "Who is Scrooge and how does he treat Bob Cratchit?",
    "global": "How does Scrooge treat Bob Cratchit, his nephew Fred and the memory of Marley?",
    "naive": "What does Scrooge say about Christmas?",
    "hybrid": "How is Marley related to Scrooge?",
    "causal": "Why does Scrooge refuse his nephew's invitation?",
    "graph": "Who is the clerk of the man whose partner was Marley?",
}
SYNTHETIC = {
    "harbour.md": """# The Harbour of Port Azurine

Captain Velmora Thistlewick commanded the Brigantine Quillfeather out of Port Azurine.
Velmora Thistlewick trusted her navigator, Oskarr Brandwhistle, above every other sailor.
Oskarr Brandwhistle charted the Glimmering Shoals for the Azurine Cartographers Society.
The Azurine Cartographers Society paid Oskarr Brandwhistle in silver from the Vault of Merrowdeep.

Harbourmaster Zephyrine Oakhollow quarrelled with Velmora Thistlewick over docking fees in Port Azurine.
Zephyrine Oakhollow later joined the Azurine Cartographers Society and mapped the Glimmering Shoals.
""",
    "voyage.txt": """The voyage of the Brigantine Quillfeather began at dawn in Port Azurine.
Velmora Thistlewick sailed the Quillfeather past the Glimmering Shoals toward the Isle of Kestrelmoor.
On the Isle of Kestrelmoor, Oskarr Brandwhistle met the hermit Tobiah Fenwrought.
Tobiah Fenwrought guarded the Vault of Merrowdeep and distrusted Zephyrine Oakhollow.
Velmora Thistlewick bargained with Tobiah Fenwrought for the charts of the Glimmering Shoals.
""",
}
SYNTHETIC_WORDS = ["thistlewick", "brandwhistle", "azurine", "oakhollow", "fenwrought", "kestrelmoor",
                   "merrowdeep", "quillfeather"]


def texts() -> tuple[str, str, str]:
    """Two disjoint slices (documents A and B of the delete test) and a longer one for cancel."""
    text = SAMPLE.read_text(encoding="utf-8-sig")
    return text[3000:20000], text[90000:107000], text[20000:90000]
