"""The files the program reads at run time, shipped inside the installed package.

Reference data for the database build (``airports.csv``, ``aircraft.json`` and the
hotel, car-rental and excursion catalogues), the company policy (``policy.md``) and the
evaluation scenarios (``scenarios/*.toml``). Code finds this folder through
``db.engine.packaged_data_dir()``, which works from a checkout, an editable install and
a wheel alike.
"""
