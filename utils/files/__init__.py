"""Files the framework writes and reads: written whole, never through a link out of an owned folder, named
from files others made only inside their destination, checked by their SHA-256."""
