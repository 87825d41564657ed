import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="explorer")


@app.cell(hide_code=True)
def _():
    import marimo as mo

    mo.md("# explorer\nWill it fit? The full app lands with the notebooks issue; `explorer shape` works today.")
    return


if __name__ == "__main__":
    app.run()
