from netd.cli import main

raise SystemExit(main())
